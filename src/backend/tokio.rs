use tokio::runtime::Handle;

use crate::Driver;

pub(crate) fn is_available() -> bool {
    Handle::try_current().is_ok()
}

/// # Panics
///
/// Never: callers check [`is_available`] first on this same thread.
pub(crate) fn spawn(run: Driver) {
    // Dropping a tokio JoinHandle detaches the task.
    drop(Handle::current().spawn(run));
}
