//! The loop's descriptors: the set a C library asks its loop to watch ([`Descriptors`]), and what
//! wakes the pump when they are ready — on Unix a descriptor watched with the runtime's reactor
//! (also one given to [`Builder::run_on_readable`](crate::Builder::run_on_readable)), on Windows
//! the loop's own thread waiting on the set.

// `--cfg ffi_pump_polling` puts Linux on the `polling` form too: `.ci/run` runs the set's tests
// that way, so the form macOS and the BSDs use runs somewhere, on `polling`'s epoll backend.
#[cfg_attr(
    all(any(target_os = "linux", target_os = "android"), not(ffi_pump_polling)),
    path = "kernel_epoll.rs"
)]
#[cfg_attr(windows, path = "kernel_iocp.rs")]
#[cfg_attr(
    all(
        unix,
        any(ffi_pump_polling, not(any(target_os = "linux", target_os = "android")))
    ),
    path = "kernel_polling.rs"
)]
mod kernel;
mod ready;
mod set;
#[cfg(all(feature = "tokio", not(loom), unix))]
mod tokio;

#[cfg(unix)]
mod fd;
#[cfg(unix)]
mod file_id;
#[cfg(windows)]
mod windows;

#[cfg(unix)]
pub(crate) use fd::{Trigger, TriggerFd, TriggerFd as TriggerSource, Watch};
pub use ready::{Interest, RawDescriptor, Ready};
pub use set::Descriptors;
#[cfg(windows)]
pub(crate) use windows::{Trigger, TriggerSet as TriggerSource, Watch};

use std::future::Future;

use crate::Error;

/// Held while a set moves its registrations to a new kernel instance, and around every other
/// kernel add that takes room under the nesting limits: a trigger registered with a reactor, a
/// pump's look-up entry of a library's descriptor, a descriptor added to a set. The kernel
/// bounds the wake-up paths through nested epoll instances (a set is one, each pump given it
/// adds a path), and a move takes the registrations out of the old instance before the new one
/// joins: an add in between would take the room the new instance needs, and the move would
/// fail with nowhere left to watch them. Each add is one system call, and a move is short.
#[cfg(unix)]
pub(crate) fn nesting() -> std::sync::MutexGuard<'static, ()> {
    static NESTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    NESTING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What wakes the pump for the set of a loop on its own thread.
pub(crate) fn own_trigger(set: &Descriptors) -> Result<Trigger, Error> {
    #[cfg(unix)]
    return TriggerFd::owned(set).register(false);
    #[cfg(windows)]
    return Ok(Trigger::of(set));
}

/// Runs the driver of a loop on its own thread: that thread sleeps in the reactor (on Unix, where
/// the set is a descriptor the reactor watches), or in the set itself (on Windows, where the set
/// has no descriptor to watch: kicks and timers wake it through the set).
pub(crate) fn block_on_loop<T>(set: Option<&Descriptors>, driver: impl Future<Output = T>) -> T {
    #[cfg(windows)]
    if let Some(set) = set {
        return windows::block_on(set, driver);
    }
    let _ = set;
    crate::reactor::block_on(driver)
}
