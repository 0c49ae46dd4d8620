//! [`Cause`]: why the driver (or a turn) runs the loop, as it decides and as traces say.

use crate::core::{Core, Ran};
use crate::trace::Round;

/// Why the pump runs the loop: what a loop on its own thread reads in [`Run::cause`], and what
/// the `tracing` feature records on each round (`cause`).
///
/// # Examples
///
/// ```
/// use ffi_pump::{Cause, Pump};
///
/// # futures_lite::future::block_on(async {
/// let (pump, _loop) = Pump::builder().build_with_state(
///     |_setup| Ok(Vec::new()),
///     |causes: &mut Vec<Cause>, run| causes.push(run.cause()),
/// )?;
/// pump.turn().await?; // asked of the loop's thread: a kick there
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
///
/// [`Run::cause`]: crate::Run::cause
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// The interval timer ticked ([`Next::Tick`](crate::Next::Tick)).
    Tick,
    /// A request for a run as soon as possible: [`Pump::kick`](crate::Pump::kick), a
    /// [`Kicker`](crate::Kicker), the very first wait on a pump that does not tick (its first
    /// run, to hear the library's first deadline; after that what the library said stands, and
    /// a loop that said [`Idle`](crate::Next::Idle) is run again only for a kick, a call, a turn
    /// or readiness; a ticking pump's first run is a [`Tick`](Cause::Tick), one interval on),
    /// and — for a loop on its own thread —
    /// a [`LoopHandle`](crate::LoopHandle) call or post and a [`Pump::turn`](crate::Pump::turn)
    /// asked from another thread.
    Kick,
    /// The readiness trigger: the descriptor given to
    /// [`run_on_readable`](crate::Builder::run_on_readable), or a descriptor in the loop's set.
    Readiness,
    /// The deadline `run_once` reported last ([`Next::At`](crate::Next::At)) came — or, for a
    /// loop with [`Timeouts`](crate::Timeouts), the first of them:
    /// [`Run::deadline_passed`](crate::Run::deadline_passed) tells the library's own deadline
    /// from its timeouts, which [`Run::expired`](crate::Run::expired) hands.
    Deadline,
    /// [`Pump::turn`](crate::Pump::turn), run by its caller (a loop in the pump only).
    Turn,
}

impl Cause {
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Cause::Tick => "tick",
            Cause::Kick => "kick",
            Cause::Readiness => "readiness",
            Cause::Deadline => "deadline",
            Cause::Turn => "turn",
        }
    }

    /// Reports a run made for this cause to the pump's span.
    pub(crate) fn report(self, core: &Core, ran: Ran) {
        core.span.round(
            Round {
                round: ran.round,
                cause: self,
                woken: ran.woken,
            },
            &ran.clock,
        );
    }
}
