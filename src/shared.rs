//! The state every handle, wait and driver of one pump shares, and the turn protocol on it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Weak};
use std::task::Waker;
use std::time::{Duration, Instant};

use async_lock::{Mutex, MutexGuardArc};
use event_listener::{listener, Event, EventListener};

use crate::reentry::{self, Inside};
use crate::registry::{Registry, Removed};
use crate::sync::{lock, AtomicBool, AtomicU64, AtomicUsize, MutexGuard};
use crate::trace::{Cause, PumpSpan, Round, RoundClock};
use crate::{Error, Stats, Strategy};

/// The loop the pump calls. `None` when it lives on the pump's own thread
/// ([`Builder::build_on_thread`](crate::Builder::build_on_thread)), which is the only place that may
/// call it.
pub(crate) type Runner = Option<Box<dyn FnMut() -> Option<Instant> + Send>>;

/// The lock whose guard is the exclusive right to call into the C library.
pub(crate) type LoopLock = Arc<Mutex<Runner>>;
pub(crate) type LoopGuard = MutexGuardArc<Runner>;

/// The future of [`Shared::lock_loop`].
#[cfg(not(loom))]
pub(crate) type LockLoop = async_lock::futures::LockArc<Runner>;
#[cfg(loom)]
pub(crate) type LockLoop = std::pin::Pin<Box<dyn std::future::Future<Output = LoopGuard> + Send>>;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) interval: Duration,
    pub(crate) idle_stop: bool,
    pub(crate) strategy: Strategy,
    /// `run_once` says when it next needs to run; the pump sleeps until then instead of ticking.
    pub(crate) hinted: bool,
}

/// Something to tell when the pump closes.
pub(crate) trait CloseHook: Send + Sync {
    fn closed(&self);
}

pub(crate) struct Shared {
    pub(crate) config: Config,
    /// [`Builder::name`](crate::Builder::name).
    pub(crate) name: Option<Arc<str>>,
    /// Where the pump's `tracing` events go (nothing without the feature).
    pub(crate) span: PumpSpan,
    /// Held while `run_once` or a wait's check talks to the C library.
    pub(crate) loop_lock: LoopLock,
    /// Held by the one driver that ticks the timer; other drivers stand by for it.
    pub(crate) driver_slot: Arc<Mutex<()>>,
    /// "The loop ran" (also sent on close), to broadcast waits and turns.
    pub(crate) ran: Event,
    /// Checks of pump-evaluated waits, run after each run.
    pub(crate) registry: Registry,
    /// Wakes the driver: a kick, a first waiter after idle, or close.
    pub(crate) wake: Event,
    /// When `run_once` last said it next needs to run (hinted pumps).
    next_deadline: crate::sync::Mutex<Option<Instant>>,
    /// A descriptor whose readiness turns the pump ([`Builder::run_on_readable`]).
    ///
    /// [`Builder::run_on_readable`]: crate::Builder::run_on_readable
    #[cfg(unix)]
    pub(crate) trigger: Option<crate::trigger::Trigger>,
    /// Why the pump stopped, when it was neither closed by a user nor poisoned by a panic.
    failure: crate::sync::Mutex<Option<Error>>,
    /// Told when the pump closes: the completion tables, whose waits it ends.
    close_hooks: crate::sync::Mutex<Vec<Weak<dyn CloseHook>>>,
    /// Runs finished.
    round: AtomicU64,
    /// Runs started: run `n` starts when this becomes `n` and has finished once `round` is `n`.
    started: AtomicU64,
    running: AtomicBool,
    closed: AtomicBool,
    panicked: AtomicBool,
    pub(crate) kicked: AtomicBool,
    pending: AtomicUsize,
    drivers: AtomicUsize,
    /// Whether a driver ever existed.
    driven: AtomicBool,
    skipped_ticks: AtomicU64,
    late_ticks: AtomicU64,
    kicks: AtomicU64,
    /// Under loom: "the loop lock was let go", for [`lock_loop`](Shared::lock_loop).
    #[cfg(loom)]
    released: Arc<Event>,
}

impl Shared {
    pub(crate) fn new(
        config: Config,
        name: Option<Arc<str>>,
        runner: Runner,
        #[cfg(unix)] trigger: Option<crate::trigger::Trigger>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            config,
            span: PumpSpan::new(name.as_deref()),
            name,
            loop_lock: Arc::new(Mutex::new(runner)),
            driver_slot: Arc::new(Mutex::new(())),
            ran: Event::new(),
            registry: Registry::default(),
            wake: Event::new(),
            // A hinted pump has not heard from `run_once` yet: its first run is due at once.
            next_deadline: crate::sync::Mutex::new(config.hinted.then(Instant::now)),
            #[cfg(unix)]
            trigger,
            failure: crate::sync::Mutex::new(None),
            close_hooks: crate::sync::Mutex::new(Vec::new()),
            round: AtomicU64::new(0),
            started: AtomicU64::new(0),
            running: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            kicked: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
            drivers: AtomicUsize::new(0),
            driven: AtomicBool::new(false),
            skipped_ticks: AtomicU64::new(0),
            late_ticks: AtomicU64::new(0),
            kicks: AtomicU64::new(0),
            #[cfg(loom)]
            released: Arc::new(Event::new()),
        })
    }

    /// Identifies this pump for re-entrancy detection.
    pub(crate) fn id(&self) -> usize {
        self as *const Shared as usize
    }

    pub(crate) fn round(&self) -> u64 {
        self.round.load(SeqCst)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(SeqCst)
    }

    /// `Ok` while the pump works, else why it does not.
    pub(crate) fn status(&self) -> Result<(), Error> {
        if self.panicked.load(SeqCst) {
            Err(Error::Panicked)
        } else if self.closed.load(SeqCst) {
            Err(self.failure().unwrap_or(Error::Closed))
        } else {
            Ok(())
        }
    }

    /// Closes the pump; `true` if this call closed it.
    pub(crate) fn close(&self) -> bool {
        let first = !self.closed.swap(true, SeqCst);
        if first {
            // Before any wait hears of it, so a subscriber sees why before the waits end.
            self.span.closed(self.status());
            // From a check the pump is evaluating, the registry is busy on this very thread:
            // the pump abandons the registered waits itself when the evaluation ends.
            if !reentry::is_inside(self.id()) {
                self.abandon_registered();
            }
            let hooks = std::mem::take(&mut *self.hooks());
            for hook in hooks.iter().filter_map(Weak::upgrade) {
                hook.closed();
            }
            self.ran.notify(usize::MAX);
            self.wake.notify(usize::MAX);
        }
        first
    }

    fn hooks(&self) -> MutexGuard<'_, Vec<Weak<dyn CloseHook>>> {
        // Only pushes and takes happen under this lock.
        lock(&self.close_hooks)
    }

    /// Tells `hook` when the pump closes (at once if it is closed already).
    pub(crate) fn on_close(&self, hook: Weak<dyn CloseHook>) {
        let mut hooks = self.hooks();
        if !self.is_closed() {
            hooks.retain(|hook| hook.strong_count() > 0);
            hooks.push(hook);
            return;
        }
        drop(hooks);
        if let Some(hook) = hook.upgrade() {
            hook.closed();
        }
    }

    /// Ends every pump-evaluated wait of a closed pump.
    fn abandon_registered(&self) {
        for waker in self.registry.close() {
            waker.wake();
        }
    }

    fn failure(&self) -> Option<Error> {
        *lock(&self.failure)
    }

    /// Stops the pump for `why`: every wait ends with that error.
    #[cfg(unix)]
    pub(crate) fn fail(&self, why: Error) {
        lock(&self.failure).get_or_insert(why);
        self.close();
    }

    /// When `run_once` last said it next needs to run.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        *lock(&self.next_deadline)
    }

    pub(crate) fn poison(&self) {
        self.panicked.store(true, SeqCst);
        self.close();
    }

    pub(crate) fn kick(&self) {
        if self.is_closed() {
            return;
        }
        self.kicks.fetch_add(1, SeqCst);
        self.kicked.store(true, SeqCst);
        self.wake.notify(usize::MAX);
    }

    /// Whether the driver may sleep until woken: nobody waits and nobody kicked.
    pub(crate) fn is_idle(&self) -> bool {
        self.config.idle_stop && self.pending.load(SeqCst) == 0 && !self.kicked.load(SeqCst)
    }

    /// Counts a wait as pending, waking an idle driver for the first one.
    pub(crate) fn add_pending(&self) {
        if self.pending.fetch_add(1, SeqCst) == 0 {
            self.wake.notify(usize::MAX);
        }
    }

    pub(crate) fn remove_pending(&self) {
        self.pending.fetch_sub(1, SeqCst);
    }

    pub(crate) fn add_driver(&self) {
        self.driven.store(true, SeqCst);
        self.drivers.fetch_add(1, SeqCst);
    }

    /// A driver left; if it was the last, nothing will ever run the loop again, so close.
    pub(crate) fn remove_driver(&self) {
        if self.drivers.fetch_sub(1, SeqCst) == 1 {
            self.close();
        }
    }

    pub(crate) fn count_late_tick(&self, late: Duration) {
        self.late_ticks.fetch_add(1, SeqCst);
        self.span.late_tick(late);
    }

    /// Why a pump without a driver cannot serve a wait: nobody ever drove it, or its last
    /// driver left, which closes it (perhaps a moment from now).
    fn undriven(&self) -> Error {
        match self.status() {
            Err(why) => why,
            Ok(()) if self.driven.load(SeqCst) => Error::Closed,
            Ok(()) => Error::NotRunning,
        }
    }

    pub(crate) fn has_driver(&self) -> bool {
        self.drivers.load(SeqCst) > 0
    }

    /// Whether a new wait may start: not from inside this pump on this thread (it would wait
    /// for itself), not on a stopped pump, not on a pump nobody drives.
    pub(crate) fn admit_wait(&self) -> Result<(), Error> {
        if reentry::is_inside(self.id()) {
            return Err(Error::Reentrant);
        }
        self.status()?;
        if !self.has_driver() {
            return Err(self.undriven());
        }
        Ok(())
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            rounds: self.round.load(SeqCst),
            pending_waits: self.pending.load(SeqCst),
            skipped_ticks: self.skipped_ticks.load(SeqCst),
            late_ticks: self.late_ticks.load(SeqCst),
            kicks: self.kicks.load(SeqCst),
            panicked: self.panicked.load(SeqCst),
            closed: self.closed.load(SeqCst),
        }
    }

    /// Runs the loop once under `guard`, with `local` when the loop lives on this thread, then
    /// the checks of the pump-evaluated waits.
    ///
    /// Bumps the round, releases the lock, then wakes the pump-evaluated waits that succeeded and
    /// tells every broadcast wait: they can check at once.
    pub(crate) fn run_locked(
        &self,
        mut guard: LoopGuard,
        local: Option<&mut dyn FnMut()>,
        cause: Cause,
    ) {
        let mut woken = Vec::new();
        let mut finished = Vec::new();
        let mut clock = RoundClock::start();
        let (outcome, round) = {
            let _inside = Inside::enter(self.id());
            self.started.fetch_add(1, SeqCst);
            self.running.store(true, SeqCst);
            let outcome = catch_unwind(AssertUnwindSafe(|| match local {
                Some(run_once) => {
                    run_once();
                    None
                }
                None => guard.as_mut().and_then(|run_once| run_once()),
            }));
            clock.ran();
            let round = self.round.fetch_add(1, SeqCst) + 1;
            self.running.store(false, SeqCst);
            if let Ok(next) = outcome {
                if self.config.hinted {
                    *lock(&self.next_deadline) = next;
                }
                let budget = self.config.interval / 2;
                self.registry.evaluate(budget, &mut woken, &mut finished);
            }
            clock.checked();
            (outcome, round)
        };
        self.release(guard);
        if outcome.is_err() {
            self.poison();
        }
        let evaluated = woken.len();
        self.wake_evaluated(woken, finished);
        let listening = self.ran.notify(usize::MAX);
        let woken = evaluated + listening;
        self.span.round(
            Round {
                round,
                cause,
                woken,
            },
            &clock,
        );
        self.settle();
    }

    /// After an evaluation, with the loop lock released: wakes the waits whose check succeeded
    /// and drops the finished entries (what their checks captured may run user code on drop).
    fn wake_evaluated(&self, woken: Vec<Waker>, finished: Vec<Removed>) {
        if self.is_closed() {
            // Closed by a check during the evaluation, which could not abandon the registry
            // it was being evaluated from.
            self.abandon_registered();
        }
        for waker in woken {
            waker.wake();
        }
        drop(finished);
    }

    /// Lets go of the loop lock, then evaluates the waits that registered meanwhile.
    pub(crate) fn unlock(&self, guard: LoopGuard) {
        self.release(guard);
        self.settle();
    }

    /// Lets go of the loop lock.
    fn release(&self, guard: LoopGuard) {
        drop(guard);
        #[cfg(loom)]
        self.released.notify(usize::MAX);
    }

    /// Waits for the loop lock: async-lock's `lock_arc`.
    ///
    /// Under loom, `try_lock_arc` retried on every release stands in: async-lock's slow path
    /// turns to its fair mode once 500 µs of wall-clock time have passed, which loom cannot
    /// replay, so a model waiting there is not deterministic. Every release of the loop lock goes
    /// through [`release`](Shared::release), which tells the stand-in.
    pub(crate) fn lock_loop(&self) -> LockLoop {
        #[cfg(not(loom))]
        return self.loop_lock.lock_arc();
        #[cfg(loom)]
        {
            let (lock, released) = (self.loop_lock.clone(), self.released.clone());
            Box::pin(async move {
                loop {
                    let listener = released.listen();
                    if let Some(guard) = lock.try_lock_arc() {
                        return guard;
                    }
                    listener.await;
                }
            })
        }
    }

    /// Evaluates the pump-evaluated waits that registered while the loop lock was busy, if it is
    /// free now.
    ///
    /// Such a wait calls this after registering, and every holder of the loop lock after letting
    /// go of it ([`unlock`](Shared::unlock)): if the wait finds the lock taken, its holder lets
    /// go later and evaluates it. So a wait whose status is already true completes without
    /// another run of the loop, which a hinted or readiness-driven pump might never make.
    pub(crate) fn settle(&self) {
        while self.registry.has_arrivals() {
            let Some(guard) = self.loop_lock.try_lock_arc() else {
                return;
            };
            let mut woken = Vec::new();
            let mut finished = Vec::new();
            {
                let _inside = Inside::enter(self.id());
                self.registry.evaluate_arrivals(&mut woken, &mut finished);
            }
            self.release(guard);
            self.wake_evaluated(woken, finished);
        }
    }

    /// The loop lock for the driver's tick; `None` if a turn is running the loop already, in
    /// which case that run, now finished, was this tick's.
    pub(crate) async fn lock_for_tick(&self) -> Option<LoopGuard> {
        if let Some(guard) = self.loop_lock.try_lock_arc() {
            return Some(guard);
        }
        listener!(self.ran => joined);
        if self.running.load(SeqCst) {
            self.skipped_ticks.fetch_add(1, SeqCst);
            self.span.skipped_tick();
            joined.await;
            return None;
        }
        // Waiters are checking their status; the run comes after them.
        Some(self.lock_loop().await)
    }

    /// [`Pump::turn`](crate::Pump::turn): returns once a run that started after the call has
    /// finished.
    ///
    /// A run already under way when the call came may have passed the point where it would see
    /// what the caller just did (a handle added, a request queued), so only a later one counts;
    /// a later run someone else makes counts as this turn's.
    pub(crate) async fn turn(self: Arc<Self>) -> Result<(), Error> {
        if reentry::is_inside(self.id()) {
            return Err(Error::Reentrant);
        }
        let mut listener = self.ran.listen();
        // After listening: a close from here on wakes the listener.
        self.status()?;
        let seen = self.started.load(SeqCst);
        loop {
            let guard = match self.loop_lock.try_lock_arc() {
                Some(guard) => guard,
                None if self.running.load(SeqCst) => {
                    listener.await;
                    listener = self.ran.listen();
                    self.status()?;
                    if self.round() > seen {
                        return Ok(());
                    }
                    continue;
                }
                // Held by waits checking their status, which is short; then run it here.
                None => self.lock_loop().await,
            };
            if self.round() > seen {
                self.unlock(guard);
                return self.status();
            }
            if guard.is_none() {
                self.unlock(guard);
                break;
            }
            self.run_locked(guard, None, Cause::Turn);
            return self.status();
        }
        // The loop lives on the pump's thread: ask it.
        if !self.has_driver() {
            return Err(self.undriven());
        }
        self.kick();
        self.ran_since(seen, listener).await
    }

    /// Waits until a run after round `seen` has finished; `listener` was made before `seen` was read.
    async fn ran_since(&self, seen: u64, mut listener: EventListener) -> Result<(), Error> {
        loop {
            listener.await;
            listener = self.ran.listen();
            self.status()?;
            if self.round() > seen {
                return Ok(());
            }
        }
    }
}
