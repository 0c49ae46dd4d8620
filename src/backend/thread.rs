//! The dedicated-thread driver: no async runtime, and a home for `!Send` loop state.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

use crate::core::Core;
use crate::driver::{drive, Driver};
use crate::{Error, Run};

const THREAD_NAME: &str = "ffi-pump";

/// Runs the pump future on a new thread.
pub(crate) fn spawn(run: Run) -> Result<(), Error> {
    thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || crate::reactor::block_on(run))
        .map(drop)
        .map_err(|err| Error::ThreadSpawn(err.kind()))
}

/// Starts the pump thread, which makes the loop with `factory` and is the only one to call it.
pub(crate) fn spawn_owner<F, R>(core: Arc<Core>, factory: F) -> Result<(), Error>
where
    F: FnOnce() -> R + Send + 'static,
    R: FnMut() + 'static,
{
    // Counted and made the active driver before the thread starts, so waits that begin at once
    // find the pump driven and no `Run` can become active on a loop only this thread may run.
    let driver = Driver::new(core.clone());
    let active = core
        .drivers
        .try_activate()
        .expect("nobody drives a new pump yet");
    thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || {
            let _driver = driver;
            let _active = active;
            let Ok(mut run_once) = catch_unwind(AssertUnwindSafe(factory)) else {
                core.fail(Error::Panicked);
                return;
            };
            crate::reactor::block_on(drive(&core, Some(&mut run_once)));
        })
        .map(drop)
        .map_err(|err| Error::ThreadSpawn(err.kind()))
}
