//! The loop's own thread: it makes the loop's state, which never leaves it (a `!Send` C handle
//! stays on the one thread that owns it), and drives the pump there.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

use std::sync::mpsc;
use std::time::Instant;

use super::{drive, DriverCount};
use crate::calls::Calls;
use crate::core::Core;
use crate::reentry::Inside;
use crate::setup::FactoryError;
use crate::{Error, IntoNext, Next, Run, Setup, Timeouts};

/// The thread's name: the loop lives on it.
const THREAD_NAME: &str = "ffi-pump-loop";

/// The stack of each thread the crate starts to run C code on: as large as a C program's main
/// thread gets on Linux, which C libraries are written for (Tcl's parser recurses into it; on
/// std's 2 MiB a deeply nested script overflowed it and aborted the process). Only the pages
/// used are committed.
pub(crate) const C_STACK_SIZE: usize = 8 << 20;

/// How the pump's span names what drives a loop on its own thread (a thread that only drives
/// the pump future is `Backend::Thread`'s "thread").
pub(crate) const LOOP_THREAD: &str = "loop-thread";

/// Starts the loop's own thread: `factory` makes the loop's state there, and only that thread runs
/// `run_once` on it, with the queued `calls` before each run. Returns once the factory did:
/// its error, or [`Error::Panicked`] if it panicked.
///
/// However the thread ends — the pump closed, the factory failed, the state's `Drop` panicked
/// — the calls are closed (the queued ones dropped unrun, so no caller waits for ever, and the
/// cleanups still owed run with the state, if there is one, before it is dropped), and then the
/// thread says the loop is gone ([`Pump::closed`](crate::Pump::closed)). A panic in the
/// factory, or in the drop of the state or of `run_once`, fails the pump with
/// [`Error::Panicked`]; none leaves the thread.
pub(crate) fn spawn_loop_thread<S, F, R, N>(
    core: Arc<Core>,
    calls: Arc<Calls<S>>,
    factory: F,
    run_once: R,
) -> Result<(), Error>
where
    S: 'static,
    F: FnOnce(&mut Setup) -> Result<S, FactoryError> + Send + 'static,
    R: FnMut(&mut S, &Run<'_>) -> N + Send + 'static,
    N: IntoNext,
{
    // Counted and made the active driver before the thread starts, so waits that begin at once
    // find the pump driven, and no `Driver` future can become active on a loop only this thread
    // may run.
    let count = DriverCount::new(core.clone());
    let active = core
        .drivers
        .try_activate()
        .expect("nobody drives a new pump yet");
    let (made, outcome) = mpsc::sync_channel::<Result<(), Error>>(1);
    thread::Builder::new()
        .name(THREAD_NAME.into())
        .stack_size(C_STACK_SIZE)
        .spawn(move || {
            let _count = count;
            let _active = active;
            let mut owned = Owned {
                core: &core,
                calls,
                state: None,
                run_once: Some(run_once),
            };
            let mut setup = Setup::new(core.clone());
            let failed = match catch_unwind(AssertUnwindSafe(|| factory(&mut setup))) {
                Ok(Ok(state)) => {
                    owned.state = Some(state);
                    None
                }
                Ok(Err(error)) => Some(Error::Factory(error.into())),
                Err(payload) => {
                    crate::unwind::forget_payload(payload);
                    Some(Error::Panicked)
                }
            };
            if let Some(why) = failed {
                return fail(&core, &made, why);
            }
            let set = setup.descriptors.take();
            let timeouts = setup.timeouts.take();
            let own_trigger = match set.as_ref().map(crate::trigger::own_trigger).transpose() {
                Ok(trigger) => trigger,
                Err(why) => return fail(&core, &made, why),
            };
            // Its timers stand on async-io's reactor: the constructor hears if it cannot start.
            if let Err(why) = crate::reactor::available() {
                return fail(&core, &made, why);
            }
            let _ = made.send(Ok(()));
            let Owned {
                calls,
                state: Some(state),
                run_once: Some(run_once),
                ..
            } = &mut owned
            else {
                unreachable!("set above")
            };
            let mut last_deadline = None;
            let mut spare = Vec::new();
            let mut run = |cause| {
                if let Some(timeouts) = &timeouts {
                    timeouts.run_begins();
                }
                calls.run_all(state, || core.is_closed());
                // Closed by a call or a post (or meanwhile): the loop is not run again.
                if core.is_closed() {
                    return None;
                }
                let now = Instant::now();
                let deadline_passed = last_deadline.is_some_and(|at| at <= now);
                let mut context = Run::new(cause, deadline_passed);
                context.set = set.as_ref();
                context.spare.set(std::mem::take(&mut spare));
                if let Some(timeouts) = &timeouts {
                    timeouts.take_due(now);
                    context.timeouts = Some(timeouts);
                }
                let running = crate::reentry::Running::enter(core.id());
                let next = run_once(state, &context).into_next();
                drop(running);
                spare = context.ready.take().unwrap_or_else(|| context.spare.take());
                last_deadline = match next {
                    Next::At(at) => Some(at),
                    Next::Tick | Next::Idle => None,
                };
                // The first timeout is the loop's deadline too, unless it ticks (it looks at its
                // timeouts at its ticks) or its own deadline comes first.
                let first = timeouts.as_ref().and_then(Timeouts::run_ends);
                Some(match (next, first) {
                    (Next::At(at), Some(first)) => Next::At(at.min(first)),
                    (Next::Idle, Some(first)) => Next::At(first),
                    (next, _) => next,
                })
            };
            let driver = drive(&core, Some(&mut run), own_trigger.as_ref());
            crate::trigger::block_on_loop(set.as_ref(), driver);
        })
        .map_err(|err| Error::ThreadSpawn(err.kind()))?;
    // The thread always answers before it ends; a thread gone without a word panicked.
    outcome.recv().unwrap_or(Err(Error::Panicked))
}

/// Fails the pump for `why` before its loop ever ran, and says so to the constructor.
fn fail(core: &Core, made: &mpsc::SyncSender<Result<(), Error>>, why: Error) {
    core.fail(why.clone());
    let _ = made.send(Err(why));
}

/// What the pump thread owns. Its drop — however the thread ends — closes the calls, running the
/// cleanups still owed with the state, then drops the state and `run_once`, in that order, on
/// the thread, inside the pump (so a re-entrant call from a `Drop` fails instead of waiting for
/// itself), each panic caught and reported; last, it says the loop is gone
/// ([`Pump::closed`](crate::Pump::closed)).
struct Owned<'a, S, R> {
    core: &'a Core,
    calls: Arc<Calls<S>>,
    state: Option<S>,
    run_once: Option<R>,
}

impl<S, R> Drop for Owned<'_, S, R> {
    fn drop(&mut self) {
        // Closed already (the driver stopped for it, or the factory failed the pump): a no-op
        // kept for whatever else ends the thread. Outside the pump: it is not inside a run.
        self.core.close();
        let _inside = Inside::enter(self.core.id());
        self.calls.close(self.state.as_mut());
        // What requests' starts returned and no cancel took: before the state they belong to.
        crate::kept::forget_pump(self.core.id());
        if let Some(state) = self.state.take() {
            self.core.drop_user("the loop's state", state);
        }
        if let Some(run_once) = self.run_once.take() {
            self.core.drop_user("run_once", run_once);
        }
        self.core.close.set_loop_gone();
    }
}
