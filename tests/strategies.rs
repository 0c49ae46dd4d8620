//! What the pump-evaluated strategy adds: checks run on the pump, and everything a check can do
//! there (panic, close the pump, drop the last handle) ends cleanly.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use async_io::Timer;
use common::{assert_clean, eventually, pending};
use fake_loop::FakeLoop;
use ffi_pump::{Error, Pump, Strategy};

on_every_backend! {
    fn checks_run_on_the_pump_thread_after_a_run(rt: Rt) {
        // Whoever runs the loop evaluates the registered checks right after the run, before it
        // lets go of the loop lock: the check that sees id 0 ready runs on the thread of the run
        // that made it ready, and no other run comes between.
        let fx = Arc::new(FakeLoop::new(1));
        let made_ready = Arc::new(Mutex::new(None::<(ThreadId, u64)>));
        let seen_ready = Arc::new(Mutex::new(None::<(ThreadId, u64)>));
        rt.block_on(async {
            let (run_fx, first_ready) = (fx.clone(), made_ready.clone());
            let pump = rt.pump_with(Pump::builder().strategy(Strategy::PumpEvaluated), move || {
                run_fx.run_once().expect("not re-entered");
                let stats = run_fx.stats();
                let mut first_ready = first_ready.lock().unwrap();
                if stats.ready > 0 && first_ready.is_none() {
                    *first_ready = Some((thread::current().id(), stats.calls));
                }
            });
            let checks = Arc::new(AtomicU32::new(0));
            let waiting = rt.spawn({
                let (pump, fx, checks, seen_ready) =
                    (pump.clone(), fx.clone(), checks.clone(), seen_ready.clone());
                async move {
                    pump.wait_until(move || {
                        checks.fetch_add(1, Ordering::SeqCst);
                        let ready = fx.check(0);
                        if ready {
                            *seen_ready.lock().unwrap() =
                                Some((thread::current().id(), fx.stats().calls));
                        }
                        ready
                    })
                    .timeout(Duration::from_secs(10))
                    .await
                }
            });
            // Armed once the pump has called the check from its registry (the second call: the
            // first may be the wait's own, as it registers), so seeing it ready is the pump's.
            let called = checks.clone();
            eventually("the pump calls the check", || called.load(Ordering::SeqCst) >= 2).await;
            fx.arm_in(0, Duration::ZERO);
            assert_eq!(waiting.await, Ok(()), "the pump evaluates the check");
            let (seen, made) = (*seen_ready.lock().unwrap(), *made_ready.lock().unwrap());
            assert!(made.is_some(), "no run made id 0 ready");
            assert_eq!(
                seen, made,
                "the check saw id 0 ready on (thread, after run #) {seen:?}; the run that made it \
                 ready: {made:?}"
            );
            assert_clean(&fx);
        });
    }

    fn a_panicking_check_fails_its_own_wait_only(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().strategy(Strategy::PumpEvaluated), &fx);
            let armed = Arc::new(AtomicBool::new(false));
            let trigger = armed.clone();
            let panicking = rt.spawn({
                let pump = pump.clone();
                async move {
                    let wait = pump.wait_until(move || {
                        assert!(!trigger.load(Ordering::SeqCst), "check panics (expected by this test)");
                        false
                    });
                    futures_lite::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(wait))
                        .await
                        .is_err()
                }
            });
            pending(&pump, 1).await;
            armed.store(true, Ordering::SeqCst);
            assert!(panicking.await, "the check's panic reaches the task that waits");
            let stats = pump.stats();
            assert!(!stats.panicked && !stats.closed, "the pump survives a check's panic: {stats:?}");
            fx.arm_in(0, Duration::ZERO);
            let check_fx = fx.clone();
            pump.wait_until(move || check_fx.check(0))
                .timeout(Duration::from_secs(10))
                .await
                .expect("later waits still complete");
        });
    }

    fn closing_from_inside_a_check_does_not_deadlock(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().strategy(Strategy::PumpEvaluated), &fx);
            let bystander = rt.spawn({
                let (pump, fx) = (pump.clone(), fx.clone());
                async move { pump.wait_until(move || fx.check(0)).timeout(Duration::from_secs(10)).await }
            });
            let closer = pump.clone();
            let rounds = pump.clone();
            let outcome = pump
                .wait_until(move || {
                    if rounds.stats().rounds >= 2 {
                        closer.close();
                    }
                    false
                })
                .timeout(Duration::from_secs(10))
                .await;
            assert_eq!(outcome, Err(Error::Closed));
            assert_eq!(bystander.await, Err(Error::Closed));
        });
    }

    fn a_check_holding_the_last_handle_can_be_dropped_by_the_pump(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        let (alive, gone) = async_channel::bounded::<()>(1);
        rt.block_on(async {
            let run_fx = fx.clone();
            let pump = rt.pump_with(Pump::builder().strategy(Strategy::PumpEvaluated), move || {
                let _alive = &alive;
                run_fx.run_once().expect("not re-entered");
            });
            // The wait's check owns a handle; the wait times out, the user drops theirs.
            let inner = pump.clone();
            let outcome = pump
                .wait_until(move || inner.is_closed())
                .timeout(Duration::from_millis(20))
                .await;
            assert_eq!(outcome, Err(Error::TimedOut));
            drop(pump);
            // The pump drops the cancelled entry (and the handle in it) when it goes idle, which
            // closes it; then the loop closure goes.
            let stopped = futures_lite::FutureExt::or(gone.recv(), async {
                Timer::after(Duration::from_secs(10)).await;
                Ok(())
            })
            .await;
            assert!(stopped.is_err(), "the pump never let go of its loop");
        });
    }

    fn timed_out_waits_release_their_checks(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().strategy(Strategy::PumpEvaluated), &fx);
            let token = Arc::new(());
            let tasks: Vec<_> = (0..200)
                .map(|_| {
                    let (pump, token) = (pump.clone(), token.clone());
                    rt.spawn(async move {
                        pump.wait_until(move || Arc::strong_count(&token) == 0)
                            .timeout(Duration::from_millis(20))
                            .await
                    })
                })
                .collect();
            for task in tasks {
                assert_eq!(task.await, Err(Error::TimedOut));
            }
            assert_eq!(pump.stats().pending_waits, 0);
            eventually("the pump drops the 200 cancelled checks", || Arc::strong_count(&token) == 1)
                .await;
        });
    }

    // Found by a hostile probe: on a pump that made no run (a loop that says nothing is due,
    // one wait keeping it from going idle), every wait that gave up kept its check, and what
    // that captured, until the next run: 10^6 waits polled and dropped grew the process by
    // 86 MB. Past 1 024 of them, outnumbering the live waits, the wait that gives up asks the
    // driver to take them out.
    fn waits_that_gave_up_on_a_pump_that_makes_no_run_are_released(rt: Rt) {
        rt.block_on(async {
            let builder = Pump::builder().interval(Duration::from_secs(3600));
            let pump = rt.pump_with(builder, || {});
            let keeping = rt.spawn(pump.wait_until(|| false).timeout(Duration::from_secs(60)));
            pending(&pump, 1).await;
            let token = Arc::new(());
            for _ in 0..5000 {
                let token = token.clone();
                let mut wait = Box::pin(pump.wait_until(move || Arc::strong_count(&token) == 0));
                assert!(futures_lite::future::poll_once(wait.as_mut()).await.is_none());
            }
            // Taken out by the driver, between its runs (none comes here).
            eventually("the given-up checks released", || Arc::strong_count(&token) - 1 < 1024)
                .await;
            assert_eq!(pump.stats().rounds, 0, "no run was made for them");
            pump.close();
            let _ = keeping.await;
        });
    }

    fn a_dropped_wait_never_runs_its_check_again(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().strategy(Strategy::PumpEvaluated), &fx);
            let gone = Arc::new(AtomicBool::new(false));
            let ran_after_drop = Arc::new(AtomicBool::new(false));
            let tasks: Vec<_> = (0..100)
                .map(|_| {
                    let (pump, gone, ran_after_drop) = (pump.clone(), gone.clone(), ran_after_drop.clone());
                    rt.spawn(async move {
                        pump.wait_until(move || {
                            if gone.load(Ordering::SeqCst) {
                                ran_after_drop.store(true, Ordering::SeqCst);
                            }
                            false
                        })
                        .timeout(Duration::from_millis(fastrand::u64(5..30)))
                        .await
                    })
                })
                .collect();
            for task in tasks {
                assert_eq!(task.await, Err(Error::TimedOut));
            }
            // Every wait has returned, so none of their checks may run from here on, even though
            // the pump keeps running (for the wait below) and has not dropped the entries yet.
            gone.store(true, Ordering::SeqCst);
            let (probe, until) = (pump.clone(), pump.stats().rounds + 20);
            pump.wait_until(move || probe.stats().rounds >= until)
                .timeout(Duration::from_secs(10))
                .await
                .expect("the pump runs 20 more rounds");
            assert!(!ran_after_drop.load(Ordering::SeqCst), "a check ran after its wait was dropped");
        });
    }

    fn dropping_a_wait_that_arrived_during_a_pass_waits_for_its_own_block_only(rt: Rt) {
        // Regression: waits that first polled while a pass held the loop lock are evaluated
        // together when it lets go, announced as "any block": dropping one of them waited for
        // every such check, not for the 64 of its own block the wait docs promise.
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let builder = Pump::builder().interval(Duration::from_secs(3600));
            let pump = rt.pump(builder, &fx);
            // A wait whose check holds the loop lock in the pass after the next run.
            let (hold, in_pass) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(false)));
            let (held, entered) = (hold.clone(), in_pass.clone());
            let mut first = true;
            let holder = pump.wait_until(move || {
                if !std::mem::take(&mut first) && held.load(Ordering::SeqCst) {
                    entered.store(true, Ordering::SeqCst);
                    let since = std::time::Instant::now();
                    while held.load(Ordering::SeqCst) && since.elapsed() < common::HANG {
                        thread::yield_now();
                    }
                }
                false
            });
            let holder = thread::spawn(move || async_io::block_on(holder));
            pending(&pump, 1).await;
            pump.kick();
            eventually("the pass holds the loop lock", || in_pass.load(Ordering::SeqCst)).await;
            // 300 waits (five blocks) arrive meanwhile; each of their checks takes 1 ms.
            let calls = Arc::new(AtomicU32::new(0));
            let mut waits: Vec<_> = (0..300)
                .map(|_| {
                    let calls = calls.clone();
                    Box::pin(pump.wait_until(move || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(1));
                        false
                    }))
                })
                .collect();
            for wait in &mut waits {
                assert!(futures_lite::future::poll_once(wait.as_mut()).await.is_none());
            }
            let last = waits.pop().expect("300 waits");
            hold.store(false, Ordering::SeqCst);
            eventually("the arrivals' checks run", || calls.load(Ordering::SeqCst) > 0).await;
            let before = calls.load(Ordering::SeqCst);
            drop(last);
            let during = calls.load(Ordering::SeqCst) - before;
            assert!(during <= 64, "the drop waited for {during} checks of other blocks");
            pump.close();
            assert_eq!(holder.join().expect("the holder's thread"), Err(Error::Closed));
        });
    }

    fn dropping_a_wait_whose_check_is_running_returns_after_the_check(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().strategy(Strategy::PumpEvaluated), &fx);
            let (running, calls) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU32::new(0)));
            let (in_check, counted) = (running.clone(), calls.clone());
            let mut wait = Box::pin(pump.wait_until(move || {
                // The first call is the wait's own, on registering; later ones are the pump's,
                // and each stands for a slow C call.
                if counted.fetch_add(1, Ordering::SeqCst) > 0 {
                    in_check.store(true, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(50));
                    in_check.store(false, Ordering::SeqCst);
                }
                false
            }));
            assert!(futures_lite::future::poll_once(wait.as_mut()).await.is_none());
            eventually("the pump runs the check", || running.load(Ordering::SeqCst)).await;
            drop(wait);
            // The drop returned: the check it found running has finished, and none starts again.
            assert!(!running.load(Ordering::SeqCst), "the drop returned during its check");
            let after_drop = calls.load(Ordering::SeqCst);
            let (probe, until) = (pump.clone(), pump.stats().rounds + 5);
            pump.wait_until(move || probe.stats().rounds >= until)
                .timeout(Duration::from_secs(10))
                .await
                .expect("the pump runs 5 more rounds");
            assert_eq!(calls.load(Ordering::SeqCst), after_drop, "a check ran after the drop");
            assert_clean(&fx);
        });
    }

    fn local_waits_take_checks_that_cannot_move(rt: Rt) {
        // A check holding an `Rc` cannot move to the pump: the awaiting task runs it, under the
        // loop lock, once as it starts and then once per round at most, never in a busy loop.
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().strategy(Strategy::PumpEvaluated), &fx);
            let rounds_before = pump.stats().rounds;
            fx.arm_in(0, Duration::from_millis(50));
            let checks = Rc::new(Cell::new(0_u64));
            let (counter, check_fx) = (checks.clone(), fx.clone());
            pump.wait_until_local(move || {
                counter.set(counter.get() + 1);
                check_fx.check(0)
            })
            .timeout(Duration::from_secs(10))
            .await
            .expect("a local wait completes");
            let (checks, rounds) = (checks.get(), pump.stats().rounds - rounds_before);
            assert!(
                checks <= rounds + 1,
                "the local check ran {checks} times in {rounds} rounds: more than once a round"
            );
            let local = Rc::new(7);
            let value = pump
                .wait_for_local(move || Some(Rc::clone(&local)))
                .await
                .expect("wait_for_local");
            assert_eq!(*value, 7, "wait_for_local yields its check's `!Send` value");
            assert_clean(&fx);
        });
    }
}

on_every_backend! {
    fn issue_15_a_close_from_a_waits_first_check_ends_every_wait(rt: Rt) {
        // Regression (#15, defect 1): a check that closes the pump in the wait's first poll (run
        // in the waiting task, not by the pump) left every pump-evaluated wait asleep, the closing
        // one too: close() skipped ending them whenever it ran inside a check, as if the pump's
        // own evaluation would do it afterwards.
        for local in [false, true] {
            let fx = Arc::new(FakeLoop::new(1));
            rt.block_on(async {
                // No ticks: the loop lock is free when the closing wait first polls.
                let builder = Pump::builder().interval(Duration::from_secs(3600));
                let pump = rt.pump(builder, &fx);
                let bystanders: Vec<_> = (0..20)
                    .map(|_| {
                        let (pump, fx) = (pump.clone(), fx.clone());
                        rt.spawn(async move {
                            pump.wait_until(move || fx.check(0))
                                .timeout(Duration::from_secs(10))
                                .await
                        })
                    })
                    .collect();
                pending(&pump, 20).await;
                let closer = pump.clone();
                let close = move || {
                    closer.close();
                    false
                };
                let started = std::time::Instant::now();
                let outcome = if local {
                    pump.wait_until_local(close).timeout(Duration::from_secs(10)).await
                } else {
                    pump.wait_until(close).timeout(Duration::from_secs(10)).await
                };
                assert_eq!(outcome, Err(Error::Closed), "the closing wait (local: {local})");
                for bystander in bystanders {
                    assert_eq!(bystander.await, Err(Error::Closed), "a bystander (local: {local})");
                }
                let elapsed = started.elapsed();
                assert!(elapsed < Duration::from_secs(2), "the waits took {elapsed:?} to end");
                assert_eq!(pump.stats().pending_waits, 0);
            });
        }
    }
}
