//! [`LoopLock`]: the exclusive right to call into the C library, and [`LoopGuard`], whose `Drop`
//! does what every holder must do on letting go.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use async_lock::{Mutex, MutexGuard, MutexGuardArc};

use super::pass_buffers::Buffers;
use super::Core;
use crate::reentry::Inside;
use crate::registry::LeftToDo;
use crate::sync::{fence, AtomicUsize};
use crate::trace::RoundClock;
use crate::unwind::DropCaught;
use crate::{Error, Next};

/// The loop, when it lives in the pump: returns when it next needs to run.
type RunOnce = Box<dyn FnMut() -> Next + Send>;

/// Where the loop lives.
pub(crate) enum Runner {
    /// Here: whoever holds the lock calls it. Whatever drops it last (the pump's last handle,
    /// a task that held it) is spared a panic from its captures' `Drop`.
    Here(DropCaught<RunOnce>),
    /// On the loop's own thread ([`Builder::build_with_state`](crate::Builder::build_with_state)),
    /// the only place that may call it; the thread passes it to [`LoopGuard::run`].
    OnPumpThread,
    /// Dropped: the pump closed and [`Pump::closed`](crate::Pump::closed) let go of it.
    Gone,
}

/// The lock around the loop: an async mutex (`async-lock`), taken with `try_lock` by whoever
/// wants to run or check, and awaited by waits that must check.
pub(crate) struct LoopLock {
    mutex: Arc<Mutex<Runner>>,
    /// "The loop lock was let go", told to everyone waiting for it ([`LoopLock::lock`]).
    released: Arc<event_listener::Event>,
    /// How many [`LoopLock::lock`] futures wait: a release with none tells nobody, sparing the
    /// event's own lock on every wait's first poll (event-listener takes it on each `notify`).
    waiting: Arc<AtomicUsize>,
}

/// One [`LoopLock::lock`] future counted in [`LoopLock`]'s `waiting` while it lives.
struct Waiting(Arc<AtomicUsize>);

impl Waiting {
    fn new(waiting: Arc<AtomicUsize>) -> Waiting {
        waiting.fetch_add(1, SeqCst);
        Waiting(waiting)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// The future of [`LoopLock::lock`]: the raw guard, to be wrapped with [`LoopGuard::new`].
pub(crate) type Lock = std::pin::Pin<Box<dyn std::future::Future<Output = RawGuard> + Send>>;

/// The mutex's own guard, as [`LoopLock::lock`] makes it; only a [`LoopGuard`] holds one.
pub(crate) type RawGuard = MutexGuardArc<Runner>;

/// The mutex's guard as a [`LoopGuard`] holds it: borrowed when taken with `try_lock`, which
/// spares every wait's first poll two counts of the lock's shared `Arc`; owned when awaited, as
/// the lock's future outlives any borrow.
enum Held<'a> {
    Borrowed(MutexGuard<'a, Runner>),
    Owned(RawGuard),
}

impl std::ops::Deref for Held<'_> {
    type Target = Runner;

    fn deref(&self) -> &Runner {
        match self {
            Held::Borrowed(guard) => guard,
            Held::Owned(guard) => guard,
        }
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Runner {
        match self {
            Held::Borrowed(guard) => guard,
            Held::Owned(guard) => guard,
        }
    }
}

impl Runner {
    /// The loop lives here.
    pub(crate) fn here(run_once: impl FnMut() -> Next + Send + 'static) -> Runner {
        Runner::Here(DropCaught::new(Box::new(run_once)))
    }
}

impl LoopLock {
    pub(crate) fn new(runner: Runner) -> LoopLock {
        LoopLock {
            mutex: Arc::new(Mutex::new(runner)),
            released: Arc::new(event_listener::Event::new()),
            waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Waits for the lock: `try_lock_arc`, retried each time the lock is let go.
    ///
    /// Not async-lock's `lock_arc`, which hands each release to one waiter: a waiter that was
    /// handed it and is then kept but never polled again (a wait that lost a `select!`, a task
    /// on an executor nobody drives) took every later release with it, and the driver, `turn`
    /// and `closed` queued behind it waited for ever — a pump that stopped running, a close
    /// that never completed. Every release is told to every waiter instead ([`LoopGuard`]'s
    /// `Drop`; a release with none counted tells nobody), which also makes the lock one loom can
    /// model (async-lock turns to a fair mode after 500 µs of wall-clock time, which loom cannot
    /// replay).
    pub(crate) fn lock(&self) -> Lock {
        let (mutex, released) = (self.mutex.clone(), self.released.clone());
        let waiting = self.waiting.clone();
        Box::pin(async move {
            let _counted = Waiting::new(waiting);
            loop {
                let listener = released.listen();
                // Pairs with the one in `release`: counted, then trying the lock here; letting
                // go, then reading the count there — with a fence between each side's write and
                // read, either this try sees the lock free or that release sees this waiter.
                fence(SeqCst);
                if let Some(guard) = mutex.try_lock_arc() {
                    return guard;
                }
                listener.await;
            }
        })
    }

    fn try_lock(&self) -> Option<Held<'_>> {
        self.mutex.try_lock().map(Held::Borrowed)
    }

    /// Lets go of a guard, then fences (what [`evaluate_arrivals_fenced`] relies on).
    fn release(&self, raw: Held<'_>) {
        drop(raw);
        fence(SeqCst);
        if self.waiting.load(SeqCst) > 0 {
            self.released.notify(usize::MAX);
        }
    }
}

/// The right to call into C, held: run the loop ([`run`](LoopGuard::run)) or checks
/// ([`check`](LoopGuard::check)).
///
/// Dropping it lets go of the lock, then — with the lock free, so nothing waits on this thread's
/// work — ends the registered waits if the pump closed while it was held (a check or `run_once`
/// that closed the pump could not: the registry may have been in use on this very thread), and
/// evaluates the pump-evaluated waits that registered while it was held (they found the lock
/// busy and left that to its holder), for at most the check budget, the driver going on with
/// the rest. This also happens when a check panics through it.
pub(crate) struct LoopGuard<'a> {
    core: &'a Core,
    raw: Option<Held<'a>>,
}

impl<'a> LoopGuard<'a> {
    /// Takes the lock if it is free.
    pub(crate) fn try_new(core: &'a Core) -> Option<LoopGuard<'a>> {
        let raw = core.loop_lock.try_lock()?;
        Some(LoopGuard {
            core,
            raw: Some(raw),
        })
    }

    /// Waits for the lock.
    ///
    /// # Cancel safety
    ///
    /// Dropped before it has the lock, it leaves the lock alone; kept unpolled, it holds nothing
    /// up either (see [`LoopLock::lock`]).
    pub(crate) async fn lock(core: &'a Core) -> LoopGuard<'a> {
        LoopGuard::new(core, core.loop_lock.lock().await)
    }

    /// Wraps a guard [`LoopLock::lock`] produced.
    pub(crate) fn new(core: &'a Core, raw: RawGuard) -> LoopGuard<'a> {
        LoopGuard {
            core,
            raw: Some(Held::Owned(raw)),
        }
    }

    /// Whether the loop lives on the pump thread, which alone may run it.
    pub(crate) fn runs_on_pump_thread(&self) -> bool {
        matches!(self.raw.as_deref(), Some(Runner::OnPumpThread))
    }

    /// Drops the loop this lock guards, if it lives here: a closed pump never runs it again.
    /// Returns whether it lived here (not on the pump thread, which drops its own).
    pub(crate) fn drop_loop(&mut self) -> bool {
        let raw = self
            .raw
            .as_mut()
            .expect("a guard holds the lock until dropped");
        match std::mem::replace(&mut **raw, Runner::Gone) {
            Runner::OnPumpThread => {
                **raw = Runner::OnPumpThread;
                false
            }
            Runner::Here(run_once) => {
                // Inside the pump: a `Drop` that awaits `closed()` is refused, not deadlocked.
                let _inside = Inside::enter(self.core.id());
                self.core.drop_user("run_once", run_once.into_inner());
                true
            }
            Runner::Gone => true,
        }
    }

    /// Runs `check` with the lock held, marked as inside this pump (so a wait or a turn started
    /// from it is refused instead of deadlocking) — unless the pump closed: then why, and the
    /// check does not run. Looked at with the lock held, since whoever drops a closed pump's loop
    /// (what a check reads) does so under it: a wait that queued for the lock before the close
    /// gets it after.
    pub(crate) fn check<T>(&self, check: impl FnOnce() -> T) -> Result<T, Error> {
        self.core.status()?;
        let _inside = Inside::enter(self.core.id());
        Ok(check())
    }

    /// Runs the loop once — `local` if the loop lives on this thread, else the lock's own —
    /// then the checks of the pump-evaluated waits, and lets go.
    ///
    /// Counts the round, wakes the pump-evaluated waits that succeeded and tells every
    /// broadcast wait: they can check at once. A panic in `run_once` is caught and closes the
    /// pump with [`Error::Panicked`]. Returns the round's figures, for whoever knows why it ran
    /// to report.
    ///
    /// # Errors
    ///
    /// Why the pump closed, if it has: no run then. The run starts in one step with a look at
    /// the close, so a driver or a turn that queued for the lock before a close, or got it as
    /// the close came, makes no run after `close()` returned. Also when `local` made no run
    /// (`None`: a call it ran first closed the pump): no round is counted for it.
    pub(crate) fn run(
        mut self,
        local: Option<&mut dyn FnMut() -> Option<Next>>,
    ) -> Result<Ran, Error> {
        let core = self.core;
        if !core.rounds.start() {
            return Err(core.close.reason());
        }
        let mut buffers = core.pass_buffers.take();
        let Buffers { woken, removed, .. } = &mut buffers;
        let mut clock = RoundClock::start();
        let (outcome, round) = {
            let _inside = Inside::enter(core.id());
            let raw = self
                .raw
                .as_mut()
                .expect("a guard holds the lock until dropped");
            let outcome = catch_unwind(AssertUnwindSafe(|| match (local, &mut **raw) {
                (Some(run_once), _) => run_once(),
                (None, Runner::Here(run_once)) => {
                    let _running = crate::reentry::Running::enter(core.id());
                    Some(run_once.get_mut()())
                }
                // `turn` asks the pump thread instead; a closed pump has no loop left.
                (None, Runner::OnPumpThread | Runner::Gone) => None,
            }));
            clock.ran();
            let round = match outcome {
                Ok(None) => core.rounds.finish_without_run(),
                _ => core.rounds.finish(),
            };
            if let Ok(Some(next)) = outcome {
                core.next.set(next);
                // A new round of checks, begun now or once the one under way is walked through.
                // A request to go on with the last one may still be set: it then finds nothing
                // left of it.
                let budget = core.config.check_budget;
                let walked = core.registry.evaluate(budget, round, woken, removed);
                if let Some(checked) = walked.checked {
                    core.rounds.checked_through(checked);
                }
                // The waits not seen may hold already: their checks go on at once, with the
                // lock let go meanwhile, and with no run (the loop has nothing new to say).
                if !walked.seen_all {
                    core.demand.go_on_checking();
                }
            }
            clock.checked();
            (outcome, round)
        };
        let outcome = outcome.map_err(crate::unwind::forget_payload);
        if outcome.is_err() {
            core.fail(Error::Panicked);
        }
        let evaluated = buffers.woken.len();
        if let Ok(None) = outcome {
            self.let_go_waking(buffers, || ());
            return Err(core.status().err().unwrap_or(Error::Closed));
        }
        let listening = self.let_go_waking(buffers, || core.rounds.announce());
        Ok(Ran {
            round,
            woken: evaluated + listening,
            clock,
        })
    }

    /// Goes on with the checks that passes left for lack of time — the arrivals', then the
    /// round's — and lets go.
    ///
    /// Not on a closed pump: its waits have ended, or end as this guard lets go (a close that
    /// found a pass under way left them to that pass's holder), and no check runs for them.
    pub(crate) fn go_on_checking(self) {
        let core = self.core;
        if core.is_closed() {
            return;
        }
        let mut buffers = core.pass_buffers.take();
        {
            let _inside = Inside::enter(core.id());
            let budget = core.config.check_budget;
            let Buffers { woken, removed, .. } = &mut buffers;
            let left = core.registry.evaluate_rest(budget, woken, removed);
            if let Some(checked) = left.checked {
                core.rounds.checked_through(checked);
            }
            if left.round || left.arrivals {
                core.demand.go_on_checking();
            }
        }
        self.let_go_waking(buffers, || ());
    }

    /// Lets go of the lock after a pass, then tells what the pass ended — its waits, then
    /// (`announce`) the run's listeners — and evaluates the arrivals, all before its count
    /// drops, so a turn that takes the lock next returns only once all of them know; only then
    /// drops the passes' wakers and entries (a task's last reference, what an ended check
    /// captured: user code that may turn the pump, which would wait for a count still up).
    fn let_go_waking<R>(mut self, mut buffers: Buffers, announce: impl FnOnce() -> R) -> R {
        let core = self.core;
        core.pass_buffers.hold(&mut buffers);
        let fenced = match self.raw.take() {
            Some(raw) => {
                core.loop_lock.release(raw);
                true
            }
            None => false,
        };
        core.pass_buffers.wake(&mut buffers);
        let announced = announce();
        let mut later = Vec::new();
        if fenced {
            evaluate_arrivals_fenced(core, Some(&mut later));
        }
        core.pass_buffers.finish(buffers);
        for buffers in later {
            core.pass_buffers.finish(buffers);
        }
        // `self` lets go of nothing more; its drop looks at the arrivals once again (after a
        // fence of its own), also if a waker or `announce` panicked above.
        announced
    }
}

/// What a run did, for its trace ([`PumpSpan::round`](crate::trace::PumpSpan::round)).
#[derive(Debug)]
#[must_use = "a run is reported by whoever knows why it ran"]
pub(crate) struct Ran {
    pub(crate) round: u64,
    /// Waits woken: pump-evaluated ones whose check succeeded, and broadcast listeners.
    pub(crate) woken: usize,
    pub(crate) clock: RoundClock,
}

impl Drop for LoopGuard<'_> {
    fn drop(&mut self) {
        match self.raw.take() {
            Some(raw) => {
                self.core.loop_lock.release(raw);
                evaluate_arrivals_fenced(self.core, None);
            }
            None => evaluate_arrivals(self.core),
        }
    }
}

/// With the loop lock let go: ends the registered waits of a closed pump, else evaluates the
/// arrivals if the lock is free (if it is not, its holder will, on letting go), for at most the
/// check budget; the driver goes on with the rest.
///
/// Every [`LoopGuard`] does this as it drops; a wait that registered while the lock was busy
/// does it too, in case the holder let go before the wait's entry arrived.
pub(crate) fn evaluate_arrivals(core: &Core) {
    fence(SeqCst);
    evaluate_arrivals_fenced(core, None);
}

/// [`evaluate_arrivals`] after a fence: [`LoopLock::release`]'s, or its own.
///
/// The fence pairs with itself on the other side. The holder lets go, then looks at the
/// arrivals; a wait makes its arrival known, then tries the lock. async-lock's own orderings are
/// release (letting go) and acquire (trying), which alone would let each side miss the other's
/// write (found by the loop lock's loom model): with a fence between each side's write and
/// read, one of them sees the other's. Since that fence is the release's, the models no longer
/// check it on the releasing side: under loom, async-lock's unlock fences (event-listener's
/// notify), which hides its absence (review: the models pass without it); outside loom that
/// fence is not one in Rust's memory model.
///
/// With `later`, each pass's count ends once it has woken its waits, and its buffers (their
/// wakers and entries, whose drop is user code) go there, for the caller to finish once its
/// own pass's count ended.
fn evaluate_arrivals_fenced(core: &Core, mut later: Option<&mut Vec<Buffers>>) {
    // Set once the budget cut an evaluation short: arrivals are then the driver's, not this
    // loop's, but a close still is.
    let mut left_to_driver = false;
    loop {
        match core.registry.left_to_do() {
            LeftToDo::Nothing => return,
            LeftToDo::Abandon => return core.registry.abandon(core.id()),
            LeftToDo::Evaluate if left_to_driver => return,
            LeftToDo::Evaluate => {}
        }
        let Some(raw) = core.loop_lock.try_lock() else {
            return;
        };
        let mut buffers = core.pass_buffers.take();
        let seen_all = {
            let _inside = Inside::enter(core.id());
            let Buffers { woken, removed, .. } = &mut buffers;
            let budget = Some(core.config.check_budget);
            core.registry.evaluate_arrivals(budget, woken, removed)
        };
        core.pass_buffers.hold(&mut buffers);
        core.loop_lock.release(raw);
        core.pass_buffers.wake(&mut buffers);
        match later.as_deref_mut() {
            Some(later) => {
                core.pass_buffers.settle(&mut buffers);
                later.push(buffers);
            }
            None => core.pass_buffers.finish(buffers),
        }
        if !seen_all {
            // The rest is the driver's, between its runs, as the rest of a round's checks is:
            // going on here would keep the lock from a kick's run for as long as they take.
            core.demand.go_on_checking();
            left_to_driver = true;
        }
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::Arc;

    use super::{evaluate_arrivals, LoopGuard};
    use crate::core::loom_support::{core, entry, Ends};
    use crate::core::Core;

    /// Another thread takes the loop lock if it is free, runs a check, and lets go.
    fn hold_the_lock_once(core: &Arc<Core>) -> loom::thread::JoinHandle<()> {
        let core = core.clone();
        loom::thread::spawn(move || {
            if let Some(guard) = LoopGuard::try_new(&core) {
                let _ = guard.check(|| ());
            }
        })
    }

    /// The loop lock guard: a wait whose status already holds, registering while another
    /// thread holds the lock, is evaluated once — by the guard letting go, or by the wait itself
    /// if the lock came free first — and needs no run, whatever the interleaving.
    #[test]
    fn a_wait_registering_while_the_lock_is_held_is_evaluated_once() {
        loom::model(|| {
            let core = core();
            let ends = Ends::new();
            let holder = hold_the_lock_once(&core);
            core.registry
                .insert(entry(&ends, true))
                .unwrap_or_else(|_| panic!("the pump is open"));
            evaluate_arrivals(&core);
            holder.join().unwrap();
            assert_eq!(ends.evaluated.load(SeqCst), 1);
            assert_eq!(core.rounds.now().round(), 0, "no run was needed");
        });
    }

    /// The same, with a driver that found the pump idle just before the wait counted itself
    /// and sweeps meanwhile (seen under load as a wait that timed out on a hinted pump): the sweep
    /// leaves the arrival to the lock's holder, which still evaluates it once.
    #[test]
    fn a_sweep_does_not_take_an_arrival_from_the_locks_holder() {
        loom::model(|| {
            let core = core();
            let ends = Ends::new();
            let holder = hold_the_lock_once(&core);
            let driver = {
                let core = core.clone();
                loom::thread::spawn(move || {
                    if core.demand.is_idle() {
                        core.registry.sweep(core.id());
                    }
                })
            };
            core.demand.add_pending();
            core.registry
                .insert(entry(&ends, true))
                .unwrap_or_else(|_| panic!("the pump is open"));
            evaluate_arrivals(&core);
            holder.join().unwrap();
            driver.join().unwrap();
            assert_eq!(ends.evaluated.load(SeqCst), 1);
        });
    }
}
