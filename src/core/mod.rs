//! The middle layer: what every handle, wait and driver of one pump shares, one part per concept.
//!
//! # Vocabulary
//!
//! One word per concept, in the code and in the docs:
//!
//! - **run**: one call of the C loop (`run_once`). **round**: the count of finished runs
//!   ([`Rounds`]).
//! - **tick**: the interval timer firing. **kick**: a request for a run as soon as possible
//!   ([`Demand`]). **turn**: [`Pump::turn`](crate::Pump::turn), which returns after a run that
//!   started after the call.
//! - **wait**: a future that resolves on a status (`wait_until`, `wait_for`, `wait_key`);
//!   **pending**: a wait that was polled and has not ended ([`Demand`]). **check**: the status
//!   call a wait hands over. **entry**: a pump-evaluated wait's check in the [`Registry`];
//!   **arrival**: an entry registered since the last evaluation; **evaluate**: run entries'
//!   checks under the loop lock.
//! - **loop lock**: the right to call into C ([`LoopLock`]); its holder has a [`LoopGuard`].
//! - **driver**: whatever polls the pump future: a task, a thread that drives it
//!   (`Backend::Thread`), or the loop's own thread ([`Drivers`]); the **active** driver is the
//!   one that ticks.
//! - **trigger**: what makes the driver run the loop besides ticks and kicks (readiness of a
//!   descriptor, the loop's own deadline); the driver asks its
//!   `Wakeups` (in `driver`, which builds on this layer) for the next **cause** of a run.
//! - **close**: the end of the pump, with one **reason** ([`Close`]).
//!
//! # Who keeps which rule
//!
//! - Letting go of the loop lock is [`LoopGuard`]'s `Drop`: it evaluates the arrivals and, if the
//!   pump closed meanwhile, ends the registered waits. Nobody releases the lock by hand.
//! - A wait counts itself pending with a [`Pending`](crate::wait::Pending) guard before the pump
//!   can see it, and uncounts itself when the guard drops with the wait.
//! - [`Core::close`] is the one close path: it marks the rounds closed, then reaches every kind of
//!   wait (the registry's, the broadcast listeners, the completion tables' through their hooks)
//!   and the drivers.

mod close;
mod deadline;
mod demand;
mod drivers;
mod loop_lock;
mod pass_buffers;
mod rounds;

pub(crate) use close::{Close, CloseHook};
pub(crate) use deadline::NextRun;
pub(crate) use demand::Demand;
pub(crate) use drivers::{Active, Drivers};
pub(crate) use loop_lock::{evaluate_arrivals, Lock, LoopGuard, LoopLock, Ran, Runner};
pub(crate) use pass_buffers::PassBuffers;
pub(crate) use rounds::Rounds;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::reentry;
use crate::registry::Registry;
use crate::stats::Counters;
use crate::trace::PumpSpan;
use crate::{Error, Stats, Strategy};

/// A pump's settings, fixed when it is built.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) interval: Duration,
    /// [`Builder::check_budget`](crate::Builder::check_budget).
    pub(crate) check_budget: Duration,
    pub(crate) idle_stop: bool,
    pub(crate) strategy: Strategy,
    /// The first run waits for the first tick; else it comes as soon as a wait is pending, to
    /// hear what `run_once` says ([`IntoNext::FIRST_AT_A_TICK`](crate::IntoNext)).
    pub(crate) first_at_a_tick: bool,
}

/// One pump's shared state: a field per concept, each with its invariant in its own module.
pub(crate) struct Core {
    pub(crate) config: Config,
    /// [`Builder::name`](crate::Builder::name).
    pub(crate) name: Option<Arc<str>>,
    /// Where the pump's `tracing` events go (nothing without the feature).
    pub(crate) span: PumpSpan,
    pub(crate) loop_lock: LoopLock,
    pub(crate) rounds: Rounds,
    pub(crate) demand: Demand,
    pub(crate) close: Close,
    pub(crate) registry: Registry,
    /// The memory of the passes over the registry, reused round after round.
    pub(crate) pass_buffers: PassBuffers,
    pub(crate) drivers: Drivers,
    /// What the last run said about the next ([`Next`](crate::Next)).
    pub(crate) next: NextRun,
    /// A descriptor whose readiness turns the pump ([`Builder::run_on_readable`]).
    ///
    /// [`Builder::run_on_readable`]: crate::Builder::run_on_readable
    pub(crate) trigger: Option<crate::trigger::Trigger>,
    pub(crate) counters: Counters,
}

impl Core {
    pub(crate) fn new(
        config: Config,
        name: Option<Arc<str>>,
        runner: Runner,
        trigger: Option<crate::trigger::Trigger>,
    ) -> Arc<Core> {
        Arc::new(Core {
            config,
            span: PumpSpan::new(name.as_deref()),
            name,
            loop_lock: LoopLock::new(runner),
            rounds: Rounds::default(),
            demand: Demand::new(config.idle_stop),
            close: Close::default(),
            registry: Registry::default(),
            pass_buffers: PassBuffers::default(),
            drivers: Drivers::default(),
            // A pump that may not tick has not heard from its loop yet: its first run is due at
            // once.
            next: NextRun::new(match config.first_at_a_tick {
                true => crate::Next::Tick,
                false => crate::Next::At(Instant::now()),
            }),
            trigger,
            counters: Counters::default(),
        })
    }

    /// Identifies this pump for re-entrancy detection.
    pub(crate) fn id(&self) -> usize {
        self as *const Core as usize
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.rounds.now().is_closed()
    }

    /// `Ok` while the pump works, else why it does not.
    pub(crate) fn status(&self) -> Result<(), Error> {
        if self.is_closed() {
            Err(self.close.reason())
        } else {
            Ok(())
        }
    }

    /// Closes the pump; `true` if this call closed it. The one close path.
    ///
    /// Every kind of wait hears of it: the registry's entries are ended here, or, when this
    /// thread holds the loop lock (a check or `run_once` closed the pump, perhaps in the middle
    /// of an evaluation) or another thread's pass over the checks (or a sweep) is under way, by
    /// its holder as it lets go — never waiting for a check
    /// ([`Pump::closed`](crate::Pump::closed) waits for that); broadcast waits and turns through
    /// the "ran" event; completion tables through their hooks; drivers through the demand event.
    pub(crate) fn close(&self) -> bool {
        // A reason from the first close on (a no-op after `fail` gave one): a failure noticed
        // later — a trigger whose descriptor went with the loop `closed()` dropped — is not the
        // reason of a pump closed already, though a panic of the run in progress still is.
        self.close.set_reason(Error::Closed);
        if !self.rounds.close() {
            return false;
        }
        // Before any wait hears of it, so a subscriber sees why before the waits end.
        self.span.closed(|| self.status());
        if reentry::is_inside(self.id()) {
            self.registry.abandon_later();
        } else {
            self.registry.abandon(self.id());
        }
        self.close.tell_hooks();
        self.rounds.announce();
        self.demand.wake_driver();
        true
    }

    /// Stops the pump for `why`: every wait ends with that error.
    pub(crate) fn fail(&self, why: Error) {
        self.close.set_reason(why);
        self.close();
    }

    /// Drops something of the user's that belongs to this pump (its loop, the loop's state),
    /// catching a panic in its `Drop`, which is reported like a panic in `run_once`: the pump
    /// closes with [`Error::Panicked`].
    pub(crate) fn drop_user(&self, what: &'static str, value: impl Sized) {
        if crate::unwind::drop_caught(value) {
            self.span.drop_panicked(what);
            // Closed already (as it nearly always is by then): waits keep the close's reason.
            match self.is_closed() {
                true => self.close.note_drop_panic(),
                false => self.fail(Error::Panicked),
            }
        }
    }

    /// Whether a new wait may start: not from inside this pump on this thread (it would wait
    /// for itself), not on a stopped pump, not on a pump nobody drives.
    pub(crate) fn may_wait(&self) -> Result<(), Error> {
        if reentry::is_inside(self.id()) {
            return Err(Error::Reentrant);
        }
        self.status()?;
        if !self.drivers.any() {
            return Err(self.undriven());
        }
        Ok(())
    }

    /// Why a pump without a driver cannot serve a wait: nobody ever drove it, or its last
    /// driver left, which closes it (perhaps a moment from now).
    pub(crate) fn undriven(&self) -> Error {
        match self.status() {
            Err(why) => why,
            Ok(()) if self.drivers.ever() => Error::Closed,
            Ok(()) => Error::NotRunning,
        }
    }

    /// Asks for a run as soon as possible.
    pub(crate) fn kick(&self) {
        if self.is_closed() {
            return;
        }
        self.counters.count_kick();
        self.demand.kick();
    }

    pub(crate) fn stats(&self) -> Stats {
        let now = self.rounds.now();
        Stats {
            rounds: now.round(),
            pending_waits: self.demand.pending(),
            skipped_ticks: self.counters.skipped_ticks(),
            late_ticks: self.counters.late_ticks(),
            kicks: self.counters.kicks(),
            panicked: now.is_closed()
                && (self.close.reason() == Error::Panicked || self.close.drop_panicked()),
            closed: now.is_closed(),
        }
    }
}

/// What the loom models of the middle layer's primitives share: a pump's core with a loop that
/// does nothing, and registry entries that count how they ended.
#[cfg(all(test, loom))]
pub(crate) mod loom_support {
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::Arc;
    use std::task::{Wake, Waker};
    use std::time::Duration;

    use loom::sync::atomic::AtomicUsize;

    use super::{Config, Core, Runner};
    use crate::registry::{Entry, Evaluate, Evaluated, Finished};
    use crate::Strategy;

    pub(crate) fn core() -> Arc<Core> {
        let config = Config {
            interval: Duration::from_millis(1),
            check_budget: Duration::from_micros(500),
            idle_stop: true,
            strategy: Strategy::PumpEvaluated,
            first_at_a_tick: true,
        };
        Core::new(config, None, Runner::here(|| crate::Next::Tick), None)
    }

    /// How a test entry ended: evaluated (its check ran) or woken as abandoned.
    #[derive(Default)]
    pub(crate) struct Ends {
        pub(crate) evaluated: AtomicUsize,
        pub(crate) abandoned: AtomicUsize,
    }

    impl Ends {
        pub(crate) fn new() -> Arc<Ends> {
            Arc::new(Ends {
                evaluated: AtomicUsize::new(0),
                abandoned: AtomicUsize::new(0),
            })
        }
    }

    struct Abandoned(Arc<Ends>);

    impl Wake for Abandoned {
        fn wake(self: Arc<Self>) {
            self.0.abandoned.fetch_add(1, SeqCst);
        }
    }

    /// An entry whose check counts its runs and finishes it when `finishes`.
    struct Counting {
        ends: Arc<Ends>,
        finishes: bool,
    }

    impl Evaluate for Counting {
        type Checked = ();

        fn evaluate(&mut self, _: bool) -> Evaluated<()> {
            self.ends.evaluated.fetch_add(1, SeqCst);
            match self.finishes {
                true => Evaluated::Checked(()),
                false => Evaluated::Pending,
            }
        }

        fn finish(&self, (): ()) -> Finished {
            Finished {
                waker: None,
                marked: false,
            }
        }

        fn is_cancelled(&self) -> bool {
            false
        }

        fn abandon(&self) -> Option<Waker> {
            Some(Waker::from(Arc::new(Abandoned(self.ends.clone()))))
        }

        fn stored_at(&self, _: u64) {}
    }

    pub(crate) fn entry(ends: &Arc<Ends>, finishes: bool) -> Entry {
        Box::new(Counting {
            ends: ends.clone(),
            finishes,
        })
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::Arc;

    use loom::sync::atomic::AtomicUsize;

    use super::loom_support::{core, entry, Ends};
    use super::{evaluate_arrivals, CloseHook, LoopGuard};

    struct Told(AtomicUsize);

    impl CloseHook for Told {
        fn closed(&self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// The close fan-out: a close, made by a check that holds the loop lock or by anyone when
    /// it is free, racing a wait that registers and a table that asks to hear of the close.
    /// The wait ends exactly once (refused, or abandoned by the close or by the guard letting
    /// go) and the table is told exactly once, whatever the interleaving.
    #[test]
    fn a_close_reaches_every_wait_and_table_once() {
        loom::model(|| {
            let core = core();
            let ends = Ends::new();
            let closer = {
                let core = core.clone();
                loom::thread::spawn(move || match LoopGuard::try_new(&core) {
                    Some(guard) => guard.check(|| core.close()).expect("only this closes it"),
                    None => core.close(),
                })
            };
            let waiter = {
                let (core, ends) = (core.clone(), ends.clone());
                loom::thread::spawn(move || match core.registry.insert(entry(&ends, false)) {
                    Ok(()) => evaluate_arrivals(&core),
                    Err(_refused) => {
                        ends.abandoned.fetch_add(1, SeqCst);
                    }
                })
            };
            let table = Arc::new(Told(AtomicUsize::new(0)));
            let hook: Arc<dyn CloseHook> = table.clone();
            core.close.hear(Arc::downgrade(&hook));
            assert!(closer.join().unwrap());
            waiter.join().unwrap();
            assert_eq!(ends.abandoned.load(SeqCst), 1, "the wait ended once");
            assert_eq!(table.0.load(SeqCst), 1, "the table was told once");
        });
    }
}
