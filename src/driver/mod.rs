//! Drivers: whatever polls the pump future (a [`Run`] task, or the pump thread), the one of them
//! that is active, and its loop: ask the [`Wakeups`] for the next cause of a run, run the loop.

mod run;
mod wakeups;

pub use run::Run;
pub(crate) use wakeups::{NextDeadline, Wakeups};

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Instant;

use async_lock::{Mutex, MutexGuardArc};
use futures_lite::FutureExt;

use crate::core::{Core, LoopGuard};
use crate::sync::AtomicUsize;
use crate::trace::Cause;
use wakeups::Next;

/// [`Drivers::state`]: a driver has existed.
const EVER: usize = 1;
/// [`Drivers::state`]: one live driver.
const DRIVER: usize = 1 << 1;

/// The pump's drivers.
///
/// `state` is `live drivers << 1 | EVER`: waits need a live driver (or they would never end),
/// and tell "nobody ever drove it" ([`Error::NotRunning`](crate::Error::NotRunning)) from "its
/// last driver left" ([`Error::Closed`](crate::Error::Closed)). `SeqCst`, like the other state
/// words: a wait reads it after the pump could have closed.
pub(crate) struct Drivers {
    state: AtomicUsize,
    /// Held by the active driver, the one that ticks; the others stand by for it.
    active: Arc<Mutex<()>>,
}

/// The right to be the active driver.
pub(crate) type Active = MutexGuardArc<()>;

impl Default for Drivers {
    fn default() -> Self {
        Drivers {
            state: AtomicUsize::new(0),
            active: Arc::new(Mutex::new(())),
        }
    }
}

impl Drivers {
    /// Whether a driver is alive.
    pub(crate) fn any(&self) -> bool {
        self.state.load(SeqCst) >= DRIVER
    }

    /// Whether a driver ever existed.
    pub(crate) fn ever(&self) -> bool {
        self.state.load(SeqCst) & EVER != 0
    }

    /// The right to be the active driver, if nobody has it.
    pub(crate) fn try_activate(&self) -> Option<Active> {
        self.active.try_lock_arc()
    }
}

/// Counts one driver of the pump while it lives (a [`Run`] or the pump thread). When the last
/// one goes before the pump closed (its task was cancelled, its runtime shut down), nothing
/// would ever run the loop again: the pump closes.
pub(crate) struct Driver {
    core: Arc<Core>,
}

impl Driver {
    pub(crate) fn new(core: Arc<Core>) -> Driver {
        // The bit first: whoever sees the count sees that a driver existed.
        core.drivers.state.fetch_or(EVER, SeqCst);
        core.drivers.state.fetch_add(DRIVER, SeqCst);
        Driver { core }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.core.drivers.state.fetch_sub(DRIVER, SeqCst) / DRIVER == 1 {
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
        let active = async { Some(core.drivers.active.lock_arc().await) }
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
/// `local` is the loop when it lives on this thread; it returns when it next needs to run.
pub(crate) async fn drive<L: FnMut() -> Option<Instant>>(core: &Core, mut local: Option<L>) {
    let mut wakeups = match Wakeups::new(core) {
        Ok(wakeups) => wakeups,
        Err(why) => {
            core.fail(why);
            return;
        }
    };
    loop {
        match wakeups.next().await {
            Next::Run(cause) => {
                if let Some(guard) = lock_for(core, cause).await {
                    guard.run(
                        cause,
                        local
                            .as_mut()
                            .map(|run_once| run_once as &mut dyn FnMut() -> Option<Instant>),
                    );
                }
            }
            // Whoever holds the lock now may be a run, which starts a new round of checks;
            // going on with the old one after it is then at worst a pass over nothing.
            Next::Check => LoopGuard::new(core, core.loop_lock.lock().await).go_on_checking(),
            Next::Stop => return,
        }
        // A run slower than the interval leaves the timer overdue (and a kick may be waiting
        // already): without handing the thread back here, the driver would run the loop again
        // and again without ever returning `Pending`, and a one-thread executor would run
        // nothing else.
        futures_lite::future::yield_now().await;
    }
}

/// The loop lock for the driver's run; `None` if a turn is running the loop already, in which
/// case that run, now finished, was this one.
async fn lock_for(core: &Core, cause: Cause) -> Option<LoopGuard<'_>> {
    if let Some(guard) = LoopGuard::try_new(core) {
        return Some(guard);
    }
    let joined = core.rounds.listen();
    if core.rounds.now().is_running() {
        if matches!(cause, Cause::Tick | Cause::Deadline) {
            core.counters.count_skipped_tick();
            core.span.skipped_tick();
        }
        joined.await;
        return None;
    }
    // Waits are checking their status; the run comes after them.
    Some(LoopGuard::new(core, core.loop_lock.lock().await))
}
