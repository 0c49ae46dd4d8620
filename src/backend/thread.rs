//! [`Backend::Thread`](crate::Backend::Thread): a thread of its own drives the pump future.

use std::thread;

use crate::{Driver, Error};

/// The thread's name: it drives the pump future (the loop itself lives elsewhere).
const THREAD_NAME: &str = "ffi-pump-driver";

/// Runs the pump future on a new thread.
pub(crate) fn spawn(run: Driver) -> Result<(), Error> {
    thread::Builder::new()
        .name(THREAD_NAME.into())
        .stack_size(crate::driver::C_STACK_SIZE)
        .spawn(move || crate::reactor::block_on(run))
        .map(drop)
        .map_err(|err| Error::ThreadSpawn(err.kind()))
}
