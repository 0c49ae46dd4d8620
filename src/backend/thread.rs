//! The dedicated-thread driver: no async runtime, and a home for `!Send` loop state.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use crate::calls::Calls;
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

/// Starts the pump thread: `factory` makes the loop's state there, and only that thread runs
/// `run_once` on it, with the queued `calls` before each run.
///
/// When the pump closes, the thread refuses further calls (dropping the queued ones unrun), drops
/// the state, and says the loop is gone ([`Pump::closed`](crate::Pump::closed)) as it ends.
pub(crate) fn spawn_owner<S, F, R>(
    core: Arc<Core>,
    calls: Option<Arc<Calls<S>>>,
    factory: F,
    mut run_once: R,
) -> Result<(), Error>
where
    S: 'static,
    F: FnOnce() -> S + Send + 'static,
    R: FnMut(&mut S) -> Option<Instant> + Send + 'static,
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
            // Declared first, so dropped last: after the state.
            let _gone = LoopGone(core.clone());
            let Ok(mut state) = catch_unwind(AssertUnwindSafe(factory)) else {
                core.fail(Error::Panicked);
                return;
            };
            let mut run = || {
                if let Some(calls) = &calls {
                    calls.run_all(&mut state);
                }
                run_once(&mut state)
            };
            crate::reactor::block_on(drive(&core, Some(&mut run)));
            if let Some(calls) = &calls {
                calls.close();
            }
            drop(state);
        })
        .map(drop)
        .map_err(|err| Error::ThreadSpawn(err.kind()))
}

/// Says the loop is gone when the pump thread ends, however it ends.
struct LoopGone(Arc<Core>);

impl Drop for LoopGone {
    fn drop(&mut self) {
        // The thread ends only once the pump is closed (or its factory panicked, which closes it).
        self.0.close();
        self.0.close.set_loop_gone();
    }
}
