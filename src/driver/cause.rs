//! [`Cause`]: why the driver (or a turn) runs the loop, as it decides and as traces say.

use crate::core::{Core, Ran};
use crate::trace::Round;

/// Why the pump ran the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The interval timer.
    Tick,
    /// [`Pump::kick`](crate::Pump::kick), or a first wait after idle.
    Kick,
    /// The readiness trigger's descriptor.
    #[cfg(unix)]
    Readiness,
    /// The deadline `run_once` reported.
    Deadline,
    /// [`Pump::turn`](crate::Pump::turn), run by its caller.
    Turn,
}

impl Cause {
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Cause::Tick => "tick",
            Cause::Kick => "kick",
            #[cfg(unix)]
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
