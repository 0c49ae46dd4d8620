//! What the pump-evaluated strategy adds: checks run on the pump, and everything a check can do
//! there (panic, close the pump, drop the last handle) ends cleanly.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_io::Timer;
use common::{assert_clean, eventually};
use fake_loop::FakeLoop;
use ffi_pump::{Error, Pump, Strategy};

on_every_backend! {
    fn checks_run_on_the_pump_thread_after_a_run(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().strategy(Strategy::PumpEvaluated), &fx);
            fx.arm_in(0, Duration::from_millis(20));
            let (check_fx, calls_seen) = (fx.clone(), Arc::new(AtomicBool::new(false)));
            let ran_before_success = calls_seen.clone();
            pump.wait_until(move || {
                let ready = check_fx.check(0);
                if ready {
                    ran_before_success.store(check_fx.stats().calls > 0, Ordering::SeqCst);
                }
                ready
            })
            .timeout(Duration::from_secs(10))
            .await
            .expect("the pump evaluates the check");
            assert!(calls_seen.load(Ordering::SeqCst), "success seen before any run");
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
            let probe = pump.clone();
            eventually("the panicking wait is pending", || probe.stats().pending_waits == 1).await;
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
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().strategy(Strategy::PumpEvaluated), &fx);
            fx.arm_in(0, Duration::from_millis(10));
            let polls = Rc::new(Cell::new(0_u32));
            let (counter, check_fx) = (polls.clone(), fx.clone());
            pump.wait_until_local(move || {
                counter.set(counter.get() + 1);
                check_fx.check(0)
            })
            .timeout(Duration::from_secs(10))
            .await
            .expect("a local wait completes");
            assert!(polls.get() >= 1);
            let value = pump.wait_for_local(|| Some(polls.get())).await.expect("wait_for_local");
            assert_eq!(value, polls.get());
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
                let probe = pump.clone();
                eventually("the bystanders are pending", || probe.stats().pending_waits == 20).await;
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
