//! The dedicated-thread driver: no async runtime, and a home for `!Send` loop state.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

use crate::run::{drive, Driver};
use crate::shared::Shared;
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
pub(crate) fn spawn_owner<F, R>(shared: Arc<Shared>, factory: F) -> Result<(), Error>
where
    F: FnOnce() -> R + Send + 'static,
    R: FnMut() + 'static,
{
    // Counted and given the driver slot before the thread starts, so waits that begin at once
    // find the pump driven and no `Run` can take the slot from the thread that owns the loop.
    let driver = Driver::new(shared.clone());
    let slot = shared
        .driver_slot
        .try_lock_arc()
        .expect("a new pump's driver slot is free");
    thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || {
            let _driver = driver;
            let _slot = slot;
            let Ok(mut run_once) = catch_unwind(AssertUnwindSafe(factory)) else {
                shared.poison();
                return;
            };
            crate::reactor::block_on(drive(&shared, Some(&mut run_once)));
        })
        .map(drop)
        .map_err(|err| Error::ThreadSpawn(err.kind()))
}
