use tokio::runtime::Handle;

use crate::Driver;

/// Whether a tokio runtime is current and takes tasks. A runtime shut down (dropped, or
/// `shutdown_background`) whose handle is still entered drops a task as it is spawned: the
/// pump's driver with it, which closed the pump where `spawn_on` said `Ok` (a probe, 10 of 10).
/// A no-op task spawned first tells: cancelled at once only there.
pub(crate) fn is_available() -> bool {
    let Ok(runtime) = Handle::try_current() else {
        return false;
    };
    let mut told = runtime.spawn(std::future::ready(()));
    let polled = futures_lite::future::block_on(futures_lite::future::poll_once(&mut told));
    !matches!(polled, Some(Err(why)) if why.is_cancelled())
}

/// # Panics
///
/// Never: callers check [`is_available`] first on this same thread.
pub(crate) fn spawn(run: Driver) {
    // Dropping a tokio JoinHandle detaches the task.
    drop(Handle::current().spawn(run));
}
