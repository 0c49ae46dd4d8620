//! Loom models of the pump protocol: every interleaving (up to `LOOM_MAX_PREEMPTIONS`
//! preemptions) of two or three threads turning, waiting, dropping waits and closing.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p ffi-pump --no-default-features --test loom`
//! (`.ci/run` does, with `LOOM_MAX_PREEMPTIONS=3`, and with `--lib` for the models of the loop
//! lock itself, in `src/core/loop_lock.rs`).
//!
//! What is real and what is modelled:
//! - The crate's own locks and atomics (`src/sync.rs`), and those inside async-lock's `Mutex` and
//!   event-listener's `Event` (their `loom` features), are loom's: loom schedules around every
//!   one of them.
//! - Waiting for the loop lock: async-lock's slow path turns fair after 500 µs of wall-clock
//!   time, which loom cannot replay (a model waiting there was not deterministic: "unexpected
//!   exploration state" under load), so under loom `LoopLock::lock` (`src/core/loop_lock.rs`)
//!   retries `try_lock_arc` on every release of the loop lock instead. The pump's protocol
//!   around the lock is unchanged.
//! - async-io does not build under loom (its reactor parks with a timeout), so `src/reactor.rs`
//!   swaps in timers that never fire. The models therefore turn the pump with `turn()` and
//!   never poll a `Driver`; they hold one only so that waits are admitted, as if a driver existed
//!   whose timer had not ticked yet.
//! - The C loop is a Rust closure, not the `fake-loop` fixture: loom only sees its own
//!   primitives, so a C function would be one indivisible step to it and an overlap could never
//!   show. The closure marks entry and exit with loom atomics, so two runs at once, or a check
//!   during a run, would be seen.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use ffi_pump::{Error, Pump, Strategy};
use futures_lite::future::poll_once;
use loom::future::block_on;
use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::thread;

/// The C side: one status flag, set by the first run, and counters that would show overlaps.
#[derive(Default)]
struct CLoop {
    inside: AtomicBool,
    /// Runs started; run `n` started when this became `n`.
    started: AtomicUsize,
    /// The number of the last run that finished.
    finished: AtomicUsize,
    /// A run started while another, or a check, was in progress.
    overlaps: AtomicUsize,
    /// "The object is done": set by every run.
    ready: AtomicBool,
}

impl CLoop {
    fn run_once(&self) {
        if self.inside.swap(true, SeqCst) {
            self.overlaps.fetch_add(1, SeqCst);
        }
        let n = self.started.fetch_add(1, SeqCst) + 1;
        self.ready.store(true, SeqCst);
        self.finished.store(n, SeqCst);
        self.inside.store(false, SeqCst);
    }

    fn check(&self) -> bool {
        if self.inside.load(SeqCst) {
            self.overlaps.fetch_add(1, SeqCst);
        }
        self.ready.load(SeqCst)
    }
}

fn pump(strategy: Strategy, c: &Arc<CLoop>) -> Pump {
    let c = c.clone();
    Pump::builder()
        .strategy(strategy)
        .build(move || c.run_once())
        .expect("valid settings")
}

fn wait(pump: &Pump, c: &Arc<CLoop>) -> impl Future<Output = Result<(), Error>> {
    let c = c.clone();
    pump.wait_until(move || c.check())
}

/// A thread awaiting [`wait`] to its end.
fn spawn_wait(pump: &Pump, c: &Arc<CLoop>) -> thread::JoinHandle<Result<(), Error>> {
    let wait = wait(pump, c);
    thread::spawn(move || block_on(wait))
}

/// One `#[test]` per wait strategy for each model named, so the two run in parallel.
macro_rules! under_both_strategies {
    ($($model:ident),* $(,)?) => {$(
        mod $model {
            #[test]
            fn pump_evaluated() {
                super::$model(ffi_pump::Strategy::PumpEvaluated);
            }

            #[test]
            fn broadcast() {
                super::$model(ffi_pump::Strategy::Broadcast);
            }
        }
    )*};
}

under_both_strategies!(
    a_status_set_by_a_run_always_wakes_its_wait,
    close_racing_a_wait_and_a_turn_never_hangs,
    dropping_a_notified_wait_does_not_swallow_another_wake_up,
);

/// (a) Two concurrent `turn()` calls never overlap the loop, and each returns only after a run
/// that started after it was called has finished.
#[test]
fn concurrent_turns_never_overlap_and_each_sees_a_later_run() {
    loom::model(|| {
        let c = Arc::new(CLoop::default());
        let pump = pump(Strategy::default(), &c);
        let turns: Vec<_> = (0..2)
            .map(|_| {
                let (pump, c) = (pump.clone(), c.clone());
                thread::spawn(move || {
                    let before = c.started.load(SeqCst);
                    assert_eq!(block_on(pump.turn()), Ok(()));
                    let finished = c.finished.load(SeqCst);
                    assert!(
                        finished > before,
                        "turn returned after run {finished}, called after run {before} had started"
                    );
                })
            })
            .collect();
        for turn in turns {
            turn.join().unwrap();
        }
        assert_eq!(c.overlaps.load(SeqCst), 0);
        let runs = c.started.load(SeqCst);
        assert!((1..=2).contains(&runs), "{runs} runs for two turns");
        assert_eq!(pump.stats().rounds, runs as u64);
    });
}

/// (b) A wait whose status becomes true in a run is woken, however its registration and check
/// interleave with that run; no other run is needed.
fn a_status_set_by_a_run_always_wakes_its_wait(strategy: Strategy) {
    loom::model(move || {
        let c = Arc::new(CLoop::default());
        let pump = pump(strategy, &c);
        let _driver = pump.run();
        let waiter = spawn_wait(&pump, &c);
        assert_eq!(block_on(pump.turn()), Ok(()));
        assert_eq!(waiter.join().unwrap(), Ok(()), "{strategy:?}");
        assert_eq!(c.overlaps.load(SeqCst), 0);
        assert_eq!(pump.stats().pending_waits, 0);
    });
}

/// (c) `close()` racing a wait and a turn: the wait ends with success or `Closed`, the turn
/// with `Ok` or `Closed`; nothing hangs.
fn close_racing_a_wait_and_a_turn_never_hangs(strategy: Strategy) {
    loom::model(move || {
        let c = Arc::new(CLoop::default());
        let pump = pump(strategy, &c);
        let driver = pump.run();
        let waiter = spawn_wait(&pump, &c);
        let turner = {
            let pump = pump.clone();
            thread::spawn(move || block_on(pump.turn()))
        };
        pump.close();
        let waited = waiter.join().unwrap();
        assert!(
            matches!(waited, Ok(()) | Err(Error::Closed)),
            "{strategy:?}: {waited:?}"
        );
        let turned = turner.join().unwrap();
        assert!(
            matches!(turned, Ok(()) | Err(Error::Closed)),
            "{strategy:?}: {turned:?}"
        );
        drop(driver);
        assert_eq!(c.overlaps.load(SeqCst), 0);
        assert_eq!(pump.stats().pending_waits, 0);
    });
}

/// (d) A wait that was notified (or is about to be) and is dropped without finishing does not
/// swallow the wake-up of another wait on the same run.
fn dropping_a_notified_wait_does_not_swallow_another_wake_up(strategy: Strategy) {
    loom::model(move || {
        let c = Arc::new(CLoop::default());
        let pump = pump(strategy, &c);
        let _driver = pump.run();
        let dropped = {
            let wait = wait(&pump, &c);
            thread::spawn(move || {
                let mut wait = pin!(wait);
                // One poll registers it (or finds the status true); then it is dropped.
                block_on(poll_once(wait.as_mut())).is_some()
            })
        };
        let waiter = spawn_wait(&pump, &c);
        assert_eq!(block_on(pump.turn()), Ok(()));
        dropped.join().unwrap();
        assert_eq!(waiter.join().unwrap(), Ok(()), "{strategy:?}");
        assert_eq!(c.overlaps.load(SeqCst), 0);
        assert_eq!(pump.stats().pending_waits, 0);
    });
}

/// (e) Once dropping a wait has returned, its check never runs again, however the drop
/// interleaves with the pump evaluating it (the C object it looks at may be freed next).
#[test]
fn a_dropped_waits_check_never_runs_again() {
    loom::model(|| {
        let c = Arc::new(CLoop::default());
        let pump = pump(Strategy::PumpEvaluated, &c);
        let _driver = pump.run();
        let dropped = Arc::new(AtomicBool::new(false));
        let late_checks = Arc::new(AtomicUsize::new(0));
        let wait = {
            let (dropped, late_checks) = (dropped.clone(), late_checks.clone());
            pump.wait_until(move || {
                if dropped.load(SeqCst) {
                    late_checks.fetch_add(1, SeqCst);
                }
                false
            })
        };
        let dropper = {
            let dropped = dropped.clone();
            thread::spawn(move || {
                // Boxed, so that `drop` drops the future itself.
                let mut wait = Box::pin(wait);
                // Registers it (the loop lock may be busy with the turn), then drops it.
                assert!(block_on(poll_once(wait.as_mut())).is_none());
                drop(wait);
                dropped.store(true, SeqCst);
            })
        };
        assert_eq!(block_on(pump.turn()), Ok(()));
        dropper.join().unwrap();
        assert_eq!(block_on(pump.turn()), Ok(()));
        assert_eq!(late_checks.load(SeqCst), 0);
        assert_eq!(pump.stats().pending_waits, 0);
    });
}

/// (f) A wait whose check holds at a run while another thread drops it: the pass finishes the
/// waits its checks ended after its walk, so the drop may return first. The wait is let go once
/// (no count left behind, no panic), and a wait beside it in the same column still gets its
/// value.
#[test]
fn a_wait_dropped_while_its_check_holds_is_let_go_once() {
    loom::model(|| {
        let c = Arc::new(CLoop::default());
        let pump = pump(Strategy::PumpEvaluated, &c);
        let _driver = pump.run();
        let armed = Arc::new(AtomicBool::new(false));
        let drops = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
        // One closure type: both waits share a column. Each check counts its captures' drops.
        let wait_for = |armed: &Arc<AtomicBool>, drops: &Arc<AtomicUsize>| {
            let (armed, counted) = (armed.clone(), DropCounted(drops.clone()));
            pump.wait_until(move || {
                let _ = &counted;
                armed.load(SeqCst)
            })
        };
        let mut beside = Box::pin(wait_for(&armed, &drops[0]));
        let dropped = wait_for(&armed, &drops[1]);
        assert!(block_on(poll_once(beside.as_mut())).is_none());
        let dropper = thread::spawn(move || {
            let mut wait = Box::pin(dropped);
            // Registers it (or finds the status true), then drops it.
            let _ = block_on(poll_once(wait.as_mut()));
            drop(wait);
        });
        armed.store(true, SeqCst);
        assert_eq!(block_on(pump.turn()), Ok(()));
        dropper.join().unwrap();
        assert_eq!(block_on(beside), Ok(()));
        assert_eq!(pump.stats().pending_waits, 0);
        // The dropped wait's entry may still be in its column, marked (its drop came after the
        // pass); the close takes it out. Each check's captures are dropped once, none kept.
        pump.close();
        for (wait, drops) in ["beside", "dropped"].iter().zip(&drops) {
            assert_eq!(
                drops.load(SeqCst),
                1,
                "the {wait} wait's check dropped once"
            );
        }
    });
}

/// Counts its drops.
struct DropCounted(Arc<AtomicUsize>);

impl Drop for DropCounted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}
