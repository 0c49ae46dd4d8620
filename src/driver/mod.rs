//! Drivers: whatever polls the pump future (a [`Driver`] task, or the loop's own thread), the one of them
//! that is active, and its loop: ask the [`Wakeups`] for the next cause of a run, run the loop.

mod cause;
mod future;
mod loop_thread;
mod wakeups;

pub use cause::Cause;
pub use future::Driver;
pub(crate) use loop_thread::{spawn_loop_thread, C_STACK_SIZE, LOOP_THREAD};
pub(crate) use wakeups::Wakeups;

use std::sync::Arc;

use futures_lite::FutureExt;

use crate::core::{Active, Core, LoopGuard};
use crate::Next;
use wakeups::Step;

/// Counts one driver of the pump while it lives (a [`Driver`] future, or the loop's own thread). When the last
/// one goes before the pump closed (its task was cancelled, its runtime shut down), nothing
/// would ever run the loop again: the pump closes.
pub(crate) struct DriverCount {
    core: Arc<Core>,
}

impl DriverCount {
    pub(crate) fn new(core: Arc<Core>) -> DriverCount {
        core.drivers.count();
        DriverCount { core }
    }
}

impl Drop for DriverCount {
    fn drop(&mut self) {
        if self.core.drivers.uncount() {
            self.core.close();
        }
    }
}

/// Waits for the right to be the active driver; `None` once the pump is closed.
pub(crate) async fn activate(core: &Core) -> Option<Active> {
    loop {
        if core.is_closed() {
            return None;
        }
        if let Some(active) = core.drivers.try_activate() {
            return Some(active);
        }
        let woken = core.demand.listen();
        if core.is_closed() {
            return None;
        }
        let active = async { Some(core.drivers.activate().await) }
            .or(async {
                woken.await;
                None
            })
            .await;
        if active.is_some() {
            return active;
        }
    }
}

/// The active driver's loop: a run for every cause its [`Wakeups`] give, until the pump closes.
/// `local` is the loop when it lives on this thread; it returns when it next needs to run, or
/// `None` if it made no run (the pump closed first).
pub(crate) async fn drive<L: FnMut(Cause) -> Option<Next>>(
    core: &Core,
    mut local: Option<L>,
    own_trigger: Option<&crate::trigger::Trigger>,
) {
    // A driver the caller runs itself (`Pump::run`) may be the process's first use of async-io,
    // whose reactor panics then if no descriptor is free: the pump fails with why instead.
    if let Err(why) = crate::reactor::available() {
        core.fail(why);
        return;
    }
    let mut wakeups = match Wakeups::new(core, own_trigger) {
        Ok(wakeups) => wakeups,
        Err(why) => {
            core.fail(why);
            return;
        }
    };
    loop {
        match wakeups.next().await {
            step @ (Step::Run(cause) | Step::Due(cause, _)) => {
                if let Some(guard) = lock_for(core, cause).await {
                    // A turn ran between the timer's coming due and this lock, and what its run
                    // said is the loop's word now: nothing due yet, or a later deadline.
                    if let Step::Due(_, armed_for) = step {
                        if core.next.get() != armed_for {
                            continue;
                        }
                    }
                    // A kick's run starts after every kick made while it queued for the lock (a
                    // turn's run going on): taken now, before the run's start, which a turn
                    // compares with, they ask for no other run. A tick's run leaves them: a kick
                    // gets a run of its own.
                    if cause == Cause::Kick {
                        let _ = core.demand.take_kick();
                    }
                    let mut for_cause = local.as_mut().map(|run_once| move || run_once(cause));
                    let local = for_cause
                        .as_mut()
                        .map(|run_once| run_once as &mut dyn FnMut() -> Option<Next>);
                    // None after a close: the next step stops.
                    if let Ok(ran) = guard.run(local) {
                        cause.report(core, ran);
                    }
                }
            }
            // Whoever holds the lock now may be a run, which starts a new round of checks;
            // going on with the old one after it is then at worst a pass over nothing.
            Step::Check => {
                // Dropped while it waits for the lock (its task cancelled), the driver leaves
                // the request for a standby driver instead of losing it.
                let owed = ChecksOwed(core);
                let guard = LoopGuard::lock(core).await;
                std::mem::forget(owed);
                guard.go_on_checking();
            }
            Step::Stop => return,
        }
    }
}

/// Puts a taken request to go on checking back, unless forgotten once the checks are under way.
struct ChecksOwed<'a>(&'a Core);

impl Drop for ChecksOwed<'_> {
    fn drop(&mut self) {
        self.0.demand.go_on_checking();
    }
}

/// Puts a taken kick back, unless forgotten once its run has the lock.
struct KickOwed<'a>(&'a Core);

impl Drop for KickOwed<'_> {
    fn drop(&mut self) {
        self.0.demand.kick();
    }
}

/// The loop lock for the driver's run; `None` if a turn is running the loop already, in which
/// case that run, now finished, was this one — except for a kick, which waits for the lock.
async fn lock_for(core: &Core, cause: Cause) -> Option<LoopGuard<'_>> {
    if let Some(guard) = LoopGuard::try_new(core) {
        return Some(guard);
    }
    if cause == Cause::Kick {
        // A kick asks for a run that starts after it, and the run under way (a turn's) may have
        // started before. Dropped while it waits for the lock (its task cancelled), the driver
        // leaves the kick for a standby driver instead of losing it.
        let owed = KickOwed(core);
        let guard = LoopGuard::lock(core).await;
        std::mem::forget(owed);
        return Some(guard);
    }
    let joined = core.rounds.listen();
    if core.rounds.now().is_running() {
        // A tick, not the loop's deadline: a pump that keeps deadlines has no ticks to skip.
        if cause == Cause::Tick {
            core.counters.count_skipped_tick();
            core.span.skipped_tick();
        }
        joined.await;
        return None;
    }
    // Waits are checking their status; the run comes after them.
    Some(LoopGuard::lock(core).await)
}
