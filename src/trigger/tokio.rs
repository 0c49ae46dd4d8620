//! Readiness through tokio's own reactor, for a driver that runs on a tokio worker.
//!
//! Through async-io, a readiness on tokio takes two hand-offs before the run: async-io's thread
//! wakes from `epoll_wait`, then wakes the pump task through tokio's injection queue. Registered
//! with tokio's reactor, the descriptor wakes the worker parked on it, which runs the pump task
//! itself (`compare --readiness` measures the difference, BENCHMARKS.md).

use std::io;
use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::Trigger;

/// The trigger's descriptor registered with the tokio runtime the driver runs on.
#[derive(Debug)]
pub(super) struct TokioReadiness {
    fd: AsyncFd<OwnedFd>,
}

impl TokioReadiness {
    /// A registration with the current tokio runtime; `None` outside one, or if the duplicate
    /// cannot be made or registered: async-io's reactor serves then.
    ///
    /// # Errors
    ///
    /// `Unsupported` if the runtime has no I/O driver. tokio cannot be asked that beforehand and
    /// panics on the registration; its message (printed by the panic hook) says what to enable.
    pub(super) fn register(trigger: &Trigger) -> Result<Option<TokioReadiness>, io::ErrorKind> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Ok(None);
        }
        let Ok(own) = trigger.duplicate() else {
            return Ok(None);
        };
        // The safe constructor is deprecated (tokio#8587) for inner types whose `as_raw_fd` can
        // change or close under tokio; an `OwnedFd` owned by the registration cannot, so it is
        // sound here, and its `unsafe` replacement would be one more audited site for nothing.
        let nesting = super::nesting();
        #[allow(deprecated)]
        let registered =
            std::panic::catch_unwind(|| AsyncFd::with_interest(own, Interest::READABLE))
                .map_err(|_| io::ErrorKind::Unsupported);
        drop(nesting);
        let registered = registered?;
        Ok(registered.ok().map(|fd| TokioReadiness { fd }))
    }

    /// Waits until the descriptor is readable, level-triggered.
    ///
    /// tokio keeps readiness from an edge until it is cleared, so a readiness that was consumed
    /// (by `run_once`) since it was seen would still be reported. The kernel is asked before
    /// trusting it, and only a readiness it denies is cleared: tokio keeps an edge that arrives
    /// after the guard was taken.
    pub(super) async fn readable(&self, trigger: &Trigger) -> io::Result<()> {
        loop {
            let mut guard = self.fd.readable().await?;
            if trigger.is_readable_now() {
                return Ok(());
            }
            guard.clear_ready();
        }
    }
}
