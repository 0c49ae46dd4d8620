//! What a pump tells [`tracing`](https://docs.rs/tracing) (cargo feature `tracing`).
//!
//! Every pump has a span, `ffi_pump::pump`, with its name ([`Builder::name`]) and, in `backend`,
//! what was last set to drive it: `loop-thread` for a loop on its own thread, or the backend of
//! the last [`spawn`](crate::Pump::spawn) or [`spawn_on`](crate::Pump::spawn_on) (`smol`,
//! `async-std`, `tokio`, `thread` for a thread that drives the pump future) — which may be a
//! driver standing by beside the active one — and nothing for a [`Pump::run`](crate::Pump::run)
//! future spawned by hand; the events below are its children:
//!
//! | level | message | fields |
//! |---|---|---|
//! | `TRACE` | `round` | `round` (its number), `cause` (`tick`, `kick`, `readiness`, `deadline`, `turn`), `run_us` (time in `run_once`; on a loop's own thread, with the calls and posts it ran just before), `checks_us` (time in the pump-evaluated checks), `woken` (what the run woke: the waits its checks ended, and every listener of the pump's runs — broadcast waits, and `turn`s and `closed()`s waiting for a run; a wait whose first check succeeded is woken by none, and the checks a pass left for lack of time wake theirs uncounted) |
//! | `DEBUG` | `late tick` | `late_us`: how long after its due time the tick was taken, or found overrun by a run and skipped |
//! | `DEBUG` | `skipped tick` | (a tick that found a turn running the loop and joined it) |
//! | `DEBUG` | `closed` | `reason`: closed by a user, by the last handle or driver going |
//! | `ERROR` | `closed` | `reason`: `run_once` panicked |
//! | `ERROR` | `drop panicked` | `what`: the loop's state or `run_once`, whose `Drop` panicked |
//! | `WARN` | `closed` | `reason`: the readiness trigger failed |
//!
//! Without the feature every item here is empty: no formatting, no clock reads, no atomics.
//! With it, the clock is read for a round only while `TRACE` is enabled for this crate.
//!
//! [`Builder::name`]: crate::Builder::name

use crate::driver::Cause;

/// A round's figures, for its event.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) struct Round {
    pub(crate) round: u64,
    pub(crate) cause: Cause,
    pub(crate) woken: usize,
}

#[cfg(feature = "tracing")]
mod on {
    use std::time::{Duration, Instant};

    use tracing::field::Empty;
    use tracing::{debug, error, trace, warn, Level};

    use super::Round;
    use crate::Error;

    /// The span of one pump.
    #[derive(Debug)]
    pub(crate) struct PumpSpan(tracing::Span);

    impl PumpSpan {
        pub(crate) fn new(name: Option<&str>) -> PumpSpan {
            PumpSpan(tracing::info_span!(
                target: "ffi_pump",
                "ffi_pump::pump",
                name = name,
                backend = Empty
            ))
        }

        pub(crate) fn driven_by(&self, backend: &str) {
            self.0.record("backend", backend);
        }

        pub(crate) fn round(&self, round: Round, clock: &RoundClock) {
            if let Some((run, checks)) = clock.split() {
                trace!(
                    target: "ffi_pump",
                    parent: &self.0,
                    round = round.round,
                    cause = round.cause.as_str(),
                    run_us = micros(run),
                    checks_us = micros(checks),
                    woken = round.woken,
                    "round"
                );
            }
        }

        pub(crate) fn late_tick(&self, late: Duration) {
            debug!(target: "ffi_pump", parent: &self.0, late_us = micros(late), "late tick");
        }

        pub(crate) fn skipped_tick(&self) {
            debug!(target: "ffi_pump", parent: &self.0, "skipped tick");
        }

        pub(crate) fn drop_panicked(&self, what: &'static str) {
            error!(target: "ffi_pump", parent: &self.0, what, "drop panicked");
        }

        pub(crate) fn closed(&self, reason: impl FnOnce() -> Result<(), Error>) {
            match reason() {
                Err(Error::Panicked) => {
                    error!(target: "ffi_pump", parent: &self.0, reason = %Error::Panicked, "closed")
                }
                Err(why @ Error::Trigger(_)) => {
                    warn!(target: "ffi_pump", parent: &self.0, reason = %why, "closed")
                }
                Err(why) => debug!(target: "ffi_pump", parent: &self.0, reason = %why, "closed"),
                Ok(()) => {
                    debug!(target: "ffi_pump", parent: &self.0, reason = %Error::Closed, "closed")
                }
            }
        }
    }

    fn micros(duration: Duration) -> u64 {
        u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
    }

    /// Times a round's run and checks, only while its event would be recorded.
    #[derive(Debug)]
    pub(crate) struct RoundClock {
        started: Option<Instant>,
        ran: Option<Instant>,
        checked: Option<Instant>,
    }

    impl RoundClock {
        pub(crate) fn start() -> RoundClock {
            let on = tracing::enabled!(target: "ffi_pump", Level::TRACE);
            RoundClock {
                started: on.then(Instant::now),
                ran: None,
                checked: None,
            }
        }

        pub(crate) fn ran(&mut self) {
            if self.started.is_some() {
                self.ran = Some(Instant::now());
            }
        }

        pub(crate) fn checked(&mut self) {
            if self.started.is_some() {
                self.checked = Some(Instant::now());
            }
        }

        fn split(&self) -> Option<(Duration, Duration)> {
            let started = self.started?;
            let ran = self.ran.unwrap_or(started);
            let checked = self.checked.unwrap_or(ran);
            Some((ran - started, checked.saturating_duration_since(ran)))
        }
    }
}

#[cfg(not(feature = "tracing"))]
mod off {
    use std::time::Duration;

    use super::Round;
    use crate::Error;

    /// Nothing: the `tracing` feature is off.
    #[derive(Debug)]
    pub(crate) struct PumpSpan;

    impl PumpSpan {
        #[inline(always)]
        pub(crate) fn new(_: Option<&str>) -> PumpSpan {
            PumpSpan
        }

        #[inline(always)]
        pub(crate) fn driven_by(&self, _: &str) {}

        #[inline(always)]
        pub(crate) fn round(&self, _: Round, _: &RoundClock) {}

        #[inline(always)]
        pub(crate) fn late_tick(&self, _: Duration) {}

        #[inline(always)]
        pub(crate) fn skipped_tick(&self) {}

        #[inline(always)]
        pub(crate) fn drop_panicked(&self, _: &'static str) {}

        /// `reason` is not even asked for.
        #[inline(always)]
        pub(crate) fn closed(&self, _: impl FnOnce() -> Result<(), Error>) {}
    }

    /// Nothing: the `tracing` feature is off.
    #[derive(Debug)]
    pub(crate) struct RoundClock;

    impl RoundClock {
        #[inline(always)]
        pub(crate) fn start() -> RoundClock {
            RoundClock
        }

        #[inline(always)]
        pub(crate) fn ran(&mut self) {}

        #[inline(always)]
        pub(crate) fn checked(&mut self) {}
    }
}

#[cfg(feature = "tracing")]
pub(crate) use on::{PumpSpan, RoundClock};

#[cfg(not(feature = "tracing"))]
pub(crate) use off::{PumpSpan, RoundClock};
