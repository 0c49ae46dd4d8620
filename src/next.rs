//! [`Next`]: what `run_once` says about when the loop next needs to run.

use std::time::Instant;

/// When the loop next needs to run, as `run_once` says by what it returns: this is how a pump
/// is told what wakes it, with no constructor per kind of library.
///
/// `run_once` may return a `Next`, or anything that turns into one ([`IntoNext`]): `()` for a
/// polled library (every run says [`Tick`](Next::Tick)), `Option<Instant>` for one that knows
/// its next deadline (`Some(at)` is [`At`](Next::At), `None` is [`Idle`](Next::Idle)). Whatever
/// it says, kicks, calls, turns and readiness of the library's descriptors run the loop too, and
/// while no wait is pending there are no ticks and no deadlines (the crate docs' "Idle"), unless
/// the pump was built with [`idle_stop(false)`](crate::Builder::idle_stop).
///
/// # Examples
///
/// ```
/// use ffi_pump::{Next, Pump};
/// use std::time::{Duration, Instant};
///
/// # futures_lite::future::block_on(async {
/// // A library that is polled while it has work in flight, and says so.
/// let pump = Pump::builder()
///     .interval(Duration::from_millis(1))
///     .build(|| {
///         let in_flight = true; // ffi::run_event_loop_once() > 0
///         if in_flight { Next::Tick } else { Next::Idle }
///     })?;
/// pump.spawn();
/// pump.turn().await?;
///
/// // A library with its own timeouts: the deadline it reports, and no interval.
/// let due = Instant::now() + Duration::from_millis(20);
/// let hinted = Pump::builder().build(move || (Instant::now() < due).then_some(due))?;
/// hinted.spawn();
/// hinted.wait_until(move || Instant::now() >= due).await?;
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// At the next tick of the interval ([`Builder::interval`](crate::Builder::interval)).
    Tick,
    /// At this instant (the library's own deadline); no ticks.
    At(Instant),
    /// Only when something else asks: readiness, a kick, a call, a turn. No ticks.
    Idle,
}

/// What `run_once` may return: a [`Next`], or what turns into one. Sealed: `()`,
/// `Option<Instant>` and `Next`.
///
/// The type also says, at build time, what the pump starts with, and whether an
/// [`interval`](crate::Builder::interval) means anything to it: `()` ticks from the start; an
/// `Option<Instant>` never ticks, so a pump of it refuses an interval; a `Next` may do either.
///
/// # Examples
///
/// ```
/// use ffi_pump::{IntoNext, Next};
/// use std::time::Instant;
///
/// assert_eq!(().into_next(), Next::Tick);
/// assert_eq!(None::<Instant>.into_next(), Next::Idle);
/// let at = Instant::now();
/// assert_eq!(Some(at).into_next(), Next::At(at));
/// ```
pub trait IntoNext: sealed::Sealed + Send + 'static {
    /// Whether the pump may tick (and so takes an interval).
    const TICKS: bool;
    /// Whether the pump's first run waits for the first tick (`true`), or comes as soon as its
    /// first wait is pending, to hear what the library says (`false`; once: after that the
    /// library's word stands).
    const FIRST_AT_A_TICK: bool;

    /// The [`Next`] it stands for.
    fn into_next(self) -> Next;
}

impl IntoNext for () {
    const TICKS: bool = true;
    const FIRST_AT_A_TICK: bool = true;

    fn into_next(self) -> Next {
        Next::Tick
    }
}

impl IntoNext for Option<Instant> {
    const TICKS: bool = false;
    const FIRST_AT_A_TICK: bool = false;

    fn into_next(self) -> Next {
        self.map_or(Next::Idle, Next::At)
    }
}

impl IntoNext for Next {
    const TICKS: bool = true;
    const FIRST_AT_A_TICK: bool = false;

    fn into_next(self) -> Next {
        self
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for () {}
    impl Sealed for Option<std::time::Instant> {}
    impl Sealed for super::Next {}
}
