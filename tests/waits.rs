//! Waits on fixture ids: completion at scale, timeouts, drops, results, the fast path.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_io::Timer;
use common::{assert_clean, calls_and_rounds, fixture_spread, STRATEGIES};
use fake_loop::FakeLoop;
use ffi_pump::{Error, Pump};
use futures_lite::FutureExt;

on_every_backend! {
    fn ten_thousand_waits_complete_with_one_run_at_a_time(rt: Rt) {
        for strategy in STRATEGIES {
            const WAITERS: u32 = 10_000;
            let fx = fixture_spread(WAITERS, Duration::from_millis(200));
            rt.block_on(async {
                let pump = rt.pump(Pump::builder().strategy(strategy), &fx);
                let tasks: Vec<_> = (0..WAITERS)
                    .map(|id| {
                        let (pump, fx) = (pump.clone(), fx.clone());
                        rt.spawn(async move {
                            pump.wait_until(move || fx.check(id))
                                .timeout(Duration::from_secs(60))
                                .await
                        })
                    })
                    .collect();
                for (id, task) in tasks.into_iter().enumerate() {
                    assert_eq!(task.await, Ok(()), "wait for id {id}");
                }
                assert_eq!(fx.stats().ready, u64::from(WAITERS));
                let (calls, rounds) = calls_and_rounds(&pump, &fx).await;
                assert_eq!(calls, rounds, "every fixture call is one pump round");
                assert_clean(&fx);
            });
        }
    }

    fn timeout_fires_after_its_duration_and_leaks_nothing(rt: Rt) {
        for strategy in STRATEGIES {
            const WAITERS: usize = 1_000;
            let fx = Arc::new(FakeLoop::new(1));
            rt.block_on(async {
                let pump = rt.pump(Pump::builder().strategy(strategy), &fx);
                let start = Instant::now();
                let outcome = pump.wait_until(|| false).timeout(Duration::from_millis(50)).await;
                let elapsed = start.elapsed();
                assert_eq!(outcome, Err(Error::TimedOut));
                assert!(elapsed >= Duration::from_millis(50), "timed out early, after {elapsed:?}");
                assert!(elapsed < Duration::from_secs(1), "timed out late, after {elapsed:?}");

                let tasks: Vec<_> = (0..WAITERS)
                    .map(|_| {
                        let (pump, fx) = (pump.clone(), fx.clone());
                        rt.spawn(async move {
                            pump.wait_until(move || fx.check(0))
                                .timeout(Duration::from_millis(50))
                                .await
                        })
                    })
                    .collect();
                for task in tasks {
                    assert_eq!(task.await, Err(Error::TimedOut));
                }
                assert_eq!(pump.stats().pending_waits, 0, "timed-out waits left behind");
                assert_clean(&fx);
            });
        }
    }

    fn dropped_waits_do_not_disturb_the_others(rt: Rt) {
        for strategy in STRATEGIES {
            const WAITERS: u32 = 5_000;
            let fx = Arc::new(FakeLoop::new(WAITERS));
            // A random half of the waits is dropped at a random moment while the other half
            // completes around it; their ids are never armed, so they are still pending when dropped.
            let drops: Vec<Option<u64>> = (0..WAITERS)
                .map(|_| fastrand::bool().then(|| fastrand::u64(0..200)))
                .collect();
            for (id, drop_after) in (0..WAITERS).zip(&drops) {
                if drop_after.is_none() {
                    fx.arm_in(id, Duration::from_millis(fastrand::u64(0..200)));
                }
            }
            rt.block_on(async {
                let pump = rt.pump(Pump::builder().strategy(strategy), &fx);
                let tasks: Vec<_> = (0..WAITERS)
                    .zip(drops)
                    .map(|(id, drop_after)| {
                        let (pump, fx) = (pump.clone(), fx.clone());
                        rt.spawn(async move {
                            let wait = pump.wait_until(move || fx.check(id)).timeout(Duration::from_secs(60));
                            match drop_after {
                                None => Some(wait.await),
                                Some(ms) => async { Some(wait.await) }
                                    .or(async {
                                        Timer::after(Duration::from_millis(ms)).await;
                                        None
                                    })
                                    .await,
                            }
                            .map(|outcome| (drop_after.is_none(), outcome))
                        })
                    })
                    .collect();
                let mut kept = 0;
                for task in tasks {
                    match task.await {
                        Some((true, outcome)) => {
                            assert_eq!(outcome, Ok(()), "a kept wait failed");
                            kept += 1;
                        }
                        Some((false, outcome)) => panic!("a wait to drop finished first: {outcome:?}"),
                        None => {}
                    }
                }
                assert!(kept > 0, "no wait was kept");
                assert_eq!(pump.stats().pending_waits, 0, "dropped waits left behind");
                assert_clean(&fx);
            });
        }
    }

    fn wait_for_yields_the_value(rt: Rt) {
        for strategy in STRATEGIES {
            let fx = fixture_spread(100, Duration::from_millis(50));
            rt.block_on(async {
                let pump = rt.pump(Pump::builder().strategy(strategy), &fx);
                let tasks: Vec<_> = (0..100)
                    .map(|id| {
                        let (pump, fx) = (pump.clone(), fx.clone());
                        rt.spawn(async move {
                            pump.wait_for(move || fx.ready_at_ns(id).map(|at| (id, at)))
                                .timeout(Duration::from_secs(10))
                                .await
                        })
                    })
                    .collect();
                for (id, task) in (0..).zip(tasks) {
                    let (seen, at) = task.await.expect("wait_for completes");
                    assert_eq!(seen, id);
                    assert_eq!(Some(at), fx.ready_at_ns(id));
                }
                assert_clean(&fx);
            });
        }
    }

    fn ready_on_first_check_needs_no_run(rt: Rt) {
        for strategy in STRATEGIES {
            let fx = Arc::new(FakeLoop::new(1));
            rt.block_on(async {
                let pump = rt.pump(Pump::builder().strategy(strategy).interval(Duration::from_secs(3600)), &fx);
                pump.wait_until(|| true).timeout(Duration::from_secs(10)).await.expect("fast path");
                assert_eq!(fx.stats().calls, 0, "the fast path ran the loop");
            });
        }
    }

    fn zero_timeout_loses_to_a_condition_that_holds(rt: Rt) {
        for strategy in STRATEGIES {
            let fx = Arc::new(FakeLoop::new(1));
            rt.block_on(async {
                let pump = rt.pump(Pump::builder().strategy(strategy), &fx);
                assert_eq!(pump.wait_until(|| true).timeout(Duration::ZERO).await, Ok(()));
                assert_eq!(
                    pump.wait_until(|| false).timeout(Duration::ZERO).await,
                    Err(Error::TimedOut)
                );
                assert_eq!(pump.stats().pending_waits, 0);
            });
        }
    }

    fn turn_runs_the_loop_once(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().interval(Duration::from_secs(3600)), &fx);
            fx.arm_in(0, Duration::ZERO);
            assert!(!fx.check(0));
            pump.turn().await.expect("turn");
            assert!(fx.check(0), "the turn did not run the loop");
            let (calls, rounds) = calls_and_rounds(&pump, &fx).await;
            assert_eq!((calls, rounds), (1, 1));
        });
    }

    fn a_turn_called_during_a_run_returns_after_a_later_run(rt: Rt) {
        // Regression, found by tests/loom.rs: a turn joined the run in progress, which may have
        // passed the point where it would see what the caller had just submitted.
        let fx = Arc::new(FakeLoop::new(1));
        fx.set_cost(Duration::from_millis(100));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().interval(Duration::from_secs(3600)), &fx);
            let first = {
                let pump = pump.clone();
                rt.spawn(async move { pump.turn().await })
            };
            let probe = fx.clone();
            common::eventually("the first run started", || probe.stats().calls == 1).await;
            pump.turn().await.expect("turn");
            let calls = fx.stats().calls;
            assert!(calls >= 2, "the turn returned after {calls} run(s), one begun before it");
            assert_eq!(first.await, Ok(()));
            assert_clean(&fx);
        });
    }
}
