//! [`Closed`]: the future of [`Pump::closed`](crate::Pump::closed).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::core::{Core, LoopGuard};
use crate::Error;

/// Future returned by [`Pump::closed`](crate::Pump::closed): resolves once the pump is closed,
/// no run is in progress and the loop has been dropped — its `run_once` closure, or, on a pump
/// thread, the state the thread made, dropped on that thread before it ended — and what the
/// pump-evaluated checks of its waits captured has been dropped.
///
/// # Errors
///
/// [`Error::Reentrant`] when polled from inside the pump (its `run_once`, one of its checks, a
/// call on its loop's thread, the drop of its loop): the loop cannot be gone while this very
/// thread is in it, so the future would wait for itself.
///
/// # Cancel safety
///
/// Dropping it changes nothing; it can be made again.
///
/// # Panics
///
/// Panics if polled again after it completed, like most futures.
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
///
/// # futures_lite::future::block_on(async {
/// let (pump, _library) = Pump::builder().build_with_state(|_| Ok(()), |_, _| None)?;
/// pump.close();
/// pump.closed().await?; // the state is dropped, on its thread
/// assert!(pump.stats().closed);
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Closed {
    id: usize,
    inner: Pin<Box<dyn Future<Output = ()> + Send>>,
    done: bool,
}

impl Closed {
    pub(crate) fn new(core: Arc<Core>) -> Closed {
        Closed {
            id: core.id(),
            inner: Box::pin(closed(core)),
            done: false,
        }
    }
}

impl Future for Closed {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        assert!(!self.done, "`Closed` polled after it completed");
        let outcome = match crate::reentry::is_inside(self.id) {
            true => Poll::Ready(Err(Error::Reentrant)),
            false => self.inner.as_mut().poll(cx).map(Ok),
        };
        self.done = outcome.is_ready();
        outcome
    }
}

impl fmt::Debug for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Closed").finish_non_exhaustive()
    }
}

async fn closed(core: Arc<Core>) {
    loop {
        let listener = core.rounds.listen();
        if core.is_closed() {
            break;
        }
        listener.await;
    }
    loop_gone(&core).await;
    // What the checks captured goes with the registry, which the holder of a pass under way at
    // the close empties only as it lets go of the loop lock: after the wait above, perhaps.
    core.registry.abandoned().await;
}

async fn loop_gone(core: &Core) {
    if core.close.is_loop_gone() {
        return;
    }
    // Taking the loop lock waits out a run in progress; a loop that lives here is dropped now.
    let mut guard = LoopGuard::lock(core).await;
    let here = guard.drop_loop();
    drop(guard);
    if here {
        core.close.set_loop_gone();
        return;
    }
    // The pump thread drops its own state, then says so.
    loop {
        let listener = core.close.listen_gone();
        if core.close.is_loop_gone() {
            return;
        }
        listener.await;
    }
}
