//! [`Turn`]: the future of [`Pump::turn`](crate::Pump::turn), and the turn itself.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use event_listener::EventListener;

use crate::core::{Core, LoopGuard};
use crate::driver::Cause;
use crate::reentry;
use crate::Error;

/// Future returned by [`Pump::turn`](crate::Pump::turn).
///
/// # Cancel safety
///
/// Dropping it leaves the pump as it was, or with a run requested as by [`Pump::kick`](crate::Pump::kick).
///
/// # Panics
///
/// Panics if polled again after it completed, like most futures; a panic of `run_once` in a run
/// it makes is caught there and ends it with [`Error::Panicked`].
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
///
/// # futures_lite::future::block_on(async {
/// let pump = Pump::new(|| {});
/// pump.spawn();
/// let turn: ffi_pump::Turn = pump.turn();
/// turn.await?;
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Turn {
    /// `None` once refused.
    inner: Option<TurnFuture>,
    pump: usize,
}

type TurnFuture = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

impl Turn {
    pub(crate) fn new(core: Arc<Core>) -> Turn {
        Turn {
            pump: core.id(),
            inner: Some(Box::pin(turn(core))),
        }
    }
}

impl Future for Turn {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self
            .inner
            .as_mut()
            .expect("a turn was polled after it completed");
        let polled = inner.as_mut().poll(cx);
        // Made (or first polled) elsewhere, and polled again inside its pump: waiting here
        // would wait for this thread.
        if polled.is_pending() && reentry::is_inside(self.pump) {
            self.inner = None;
            return Poll::Ready(Err(Error::Reentrant));
        }
        polled
    }
}

impl fmt::Debug for Turn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Turn").finish_non_exhaustive()
    }
}

/// Returns once a run that started after the call has finished, and the checks of its round.
///
/// A run already under way when the call came may have passed the point where it would see what
/// the caller just did (a handle added, a request queued), so only a later one counts; a later
/// run someone else makes counts as this turn's.
async fn turn(core: Arc<Core>) -> Result<(), Error> {
    if reentry::is_inside(core.id()) {
        return Err(Error::Reentrant);
    }
    let mut listener = core.rounds.listen();
    // After listening: a close from here on wakes the listener.
    core.status()?;
    let seen = core.rounds.now().started();
    loop {
        let guard = match LoopGuard::try_new(&core) {
            Some(guard) => guard,
            None if core.rounds.now().is_running() => {
                listener.await;
                listener = core.rounds.listen();
                core.status()?;
                if core.rounds.now().round() > seen {
                    return checks_of(&core, seen + 1).await;
                }
                continue;
            }
            // Held by waits checking their status, which is short; then run it here.
            None => LoopGuard::lock(&core).await,
        };
        if core.rounds.now().round() > seen {
            drop(guard);
            return checks_of(&core, seen + 1).await;
        }
        if guard.runs_on_pump_thread() {
            drop(guard);
            break;
        }
        let before = core.next.get();
        let ran = guard.run(None)?;
        // The driver sleeps on what the runs it made said; what this one says is news to it (a
        // deadline, ticks, or nothing due any more).
        if core.next.get() != before {
            core.demand.wake_driver();
        }
        let round = ran.round;
        Cause::Turn.report(&core, ran);
        return checks_of(&core, round).await;
    }
    // The loop lives on the pump's thread: ask it.
    if !core.drivers.any() {
        return Err(core.undriven());
    }
    core.kick();
    ran_since(&core, seen, listener).await?;
    checks_of(&core, seen + 1).await
}

/// Returns once every check of `round` has been evaluated.
///
/// A pass that spends its budget lets go of the lock and leaves the rest of the round to the
/// driver; a machine that stops the thread for longer than the budget is enough. A turn's caller
/// counts on the round being complete (a wait whose condition held at the run is woken by the
/// time the turn returns), so the turn goes on with it itself, pass by pass, letting go of the
/// lock between them as the driver does. Without a driver nobody else would.
///
/// Each pass wakes the waits its checks ended once it let go of the lock: the pass that ends
/// the round may come while an earlier one is still waking its own, and the turn waits for
/// those too (the wakers' calls, no more).
async fn checks_of(core: &Core, round: u64) -> Result<(), Error> {
    while !core.rounds.is_checked(round) {
        core.status()?;
        let guard = LoopGuard::lock(core).await;
        if !core.rounds.is_checked(round) {
            guard.go_on_checking();
        }
    }
    core.pass_buffers.settled().await;
    core.status()
}

/// Waits until a run after round `seen` has finished; `listener` was made before `seen` was read.
async fn ran_since(core: &Core, seen: u64, mut listener: EventListener) -> Result<(), Error> {
    loop {
        listener.await;
        listener = core.rounds.listen();
        core.status()?;
        if core.rounds.now().round() > seen {
            return Ok(());
        }
    }
}
