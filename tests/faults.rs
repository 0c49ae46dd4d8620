//! Faults: a loop that panics, blocks, loses its driver, or calls back into the pump.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_io::Timer;
use common::{Rt, STRATEGIES};
use fake_loop::FakeLoop;
use ffi_pump::{Error, Pump};
use futures_lite::future;

/// A cancellable handle on the pump future spawned on `rt`'s executor.
fn spawn_run(rt: Rt, pump: &Pump) -> Box<dyn FnOnce() + Send> {
    let run = pump.run();
    match rt {
        Rt::Smol => {
            let task = smol::spawn(run);
            Box::new(move || drop(task))
        }
        Rt::AsyncStd => {
            let task = async_std::task::spawn(run);
            Box::new(move || {
                future::block_on(task.cancel());
            })
        }
        Rt::Tokio => {
            let task = tokio::spawn(run);
            Box::new(move || task.abort())
        }
        Rt::Thread | Rt::LoopThread => {
            // The pump future on a thread of its own, dropped when `stop` is.
            let (stop, stopped) = async_channel::bounded::<()>(1);
            std::thread::spawn(move || {
                async_io::block_on(future::or(run, async move {
                    let _ = stopped.recv().await;
                }))
            });
            Box::new(move || drop(stop))
        }
    }
}

on_every_backend! {
    fn run_once_panicking_on_every_call_fails_every_wait(rt: Rt) {
        for strategy in STRATEGIES {
            rt.block_on(async {
                let pump = rt.pump_with(Pump::builder().strategy(strategy), || {
                    panic!("run_once panics on every call (expected by this test)");
                });
                let tasks: Vec<_> = (0..50)
                    .map(|_| {
                        let pump = pump.clone();
                        rt.spawn(async move { pump.wait_until(|| false).await })
                    })
                    .collect();
                for task in tasks {
                    assert_eq!(task.await, Err(Error::Panicked), "{strategy:?}");
                }
                assert_eq!(pump.stats().rounds, 1, "the loop ran again after its panic");
            });
        }
    }

    fn a_blocking_loop_on_its_own_thread_leaves_the_executor_free(rt: Rt) {
        // The documented way to offload a blocking `run_once`: `Builder::build_with_state`, here
        // with the loop as its own state.
        let fx = Arc::new(FakeLoop::new(1));
        let started = Arc::new(AtomicU64::new(0));
        rt.block_on(async {
            let (run_fx, run_started) = (fx.clone(), started.clone());
            let (pump, _loop) = Pump::builder()
                .build_with_state(
                    move |_| {
                        Ok(move || {
                            run_started.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(200));
                            run_fx.run_once().expect("not re-entered");
                        })
                    },
                    |run_once, _| run_once(),
                )
                .expect("pump thread");
            fx.arm_in(0, Duration::ZERO);
            let waiter = rt.spawn({
                let (pump, fx) = (pump.clone(), fx.clone());
                async move { pump.wait_until(move || fx.check(0)).timeout(Duration::from_secs(10)).await }
            });
            while started.load(Ordering::SeqCst) == 0 {
                Timer::after(Duration::from_millis(1)).await;
            }
            // The loop is inside its 200 ms call now; a short task on the executor still runs.
            let ticked = Instant::now();
            let quick = rt.spawn(async {
                Timer::after(Duration::from_millis(10)).await;
                Instant::now()
            });
            let done = quick.await.duration_since(ticked);
            assert!(done < Duration::from_millis(150), "the executor waited for the loop: {done:?}");
            assert_eq!(waiter.await, Ok(()));
        });
    }

    fn dropping_the_pump_task_ends_waits_with_closed(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let run_fx = fx.clone();
            let pump = Pump::new(move || run_fx.run_once().expect("not re-entered"));
            let cancel = spawn_run(rt, &pump);
            let tasks: Vec<_> = (0..100)
                .map(|_| {
                    let (pump, fx) = (pump.clone(), fx.clone());
                    rt.spawn(async move { pump.wait_until(move || fx.check(0)).await })
                })
                .collect();
            let probe = pump.clone();
            pump.wait_until(move || probe.stats().pending_waits > 100)
                .timeout(Duration::from_secs(10))
                .await
                .expect("all waits pending");
            cancel();
            for task in tasks {
                assert_eq!(task.await, Err(Error::Closed));
            }
            assert!(pump.is_closed(), "a pump whose driver is gone is closed");
        });
    }

    fn calling_back_into_the_pump_from_run_once_is_refused(rt: Rt) {
        rt.block_on(async {
            let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
            let (inner, record) = (Arc::new(std::sync::OnceLock::<Pump>::new()), seen.clone());
            let handle = inner.clone();
            let pump = rt.pump_with(Pump::builder(), move || {
                if let Some(pump) = handle.get() {
                    // What a C callback calling back into Rust might do: block on the pump.
                    let turn = future::block_on(pump.turn());
                    let wait = future::block_on(pump.wait_until(|| true));
                    record.lock().unwrap().push((turn, wait));
                }
            });
            inner.set(pump.clone()).expect("set once");
            pump.turn().await.expect("turn");
            let seen = seen.lock().unwrap().clone();
            assert!(!seen.is_empty(), "run_once ran");
            assert!(seen.iter().all(|o| *o == (Err(Error::Reentrant), Err(Error::Reentrant))), "{seen:?}");
            // The pump is not stuck: it still runs.
            pump.turn().await.expect("turn after a refused re-entry");
            drop(inner);
        });
    }

    fn calling_back_into_the_pump_from_a_check_is_refused(rt: Rt) {
        for strategy in STRATEGIES {
            rt.block_on(async {
                let pump = rt.pump_with(Pump::builder().strategy(strategy), || {});
                let inner = pump.clone();
                let outcome = pump
                    .wait_for(move || Some(future::block_on(inner.turn())))
                    .timeout(Duration::from_secs(10))
                    .await;
                assert_eq!(outcome, Ok(Err(Error::Reentrant)), "{strategy:?}");
            });
        }
    }
}

/// Regression: with `run_once` slower than the interval the timer is always overdue, and the
/// driver ran the loop again without ever handing the thread back, so on a one-thread executor
/// no other task (not even a timed-out wait) ran again.
#[test]
fn a_loop_slower_than_its_interval_leaves_a_one_thread_executor_free() {
    let pump = Pump::new(|| std::thread::sleep(Duration::from_millis(3)));
    let (done, outcome) = std::sync::mpsc::channel();
    let driven = pump.clone();
    // The executor on a thread of its own: before the fix it never came back to be timed out.
    let executor_thread = std::thread::spawn(move || {
        let executor = async_executor::Executor::new();
        let driver = executor.spawn(driven.run());
        let probe = driven.clone();
        let waiting = executor.spawn(async move {
            probe
                .wait_until(|| false)
                .timeout(Duration::from_millis(50))
                .await
        });
        let started = Instant::now();
        let other = executor.spawn(async move {
            Timer::after(Duration::from_millis(20)).await;
            started.elapsed()
        });
        async_io::block_on(executor.run(async {
            let _ = done.send((waiting.await, other.await));
            driven.close();
            driver.await;
        }));
    });
    let Ok((waited, other_after)) = outcome.recv_timeout(Duration::from_secs(5)) else {
        pump.close();
        panic!("the pump kept the executor's only thread for 5 s");
    };
    assert_eq!(waited, Err(Error::TimedOut));
    assert!(
        other_after < Duration::from_secs(1),
        "a 20 ms timer task ran after {other_after:?}"
    );
    executor_thread.join().expect("the executor thread ends");
}
