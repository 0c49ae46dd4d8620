//! The readiness trigger watched with tokio's reactor (`Builder::tokio_readiness`): it turns the
//! pump, stays level-triggered, does not spin on tokio's cached readiness, fails clearly on a
//! runtime without an I/O driver, and lets waits end when the runtime shuts down.
#![cfg(all(unix, feature = "tokio"))]

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_clean, calls_and_rounds, cpu_ticks, eventually, pending, Threads};
use fake_loop::FakeLoop;
use ffi_pump::{Backend, Builder, Error, Pump};
use futures_lite::FutureExt;

/// The worker threads of the level-triggered test's runtime are named so, to read their CPU time
/// apart from the other tests in this process.
const WORKER: &str = "ffi-level-test";

fn runtime(flavor: tokio::runtime::RuntimeFlavor, thread_name: &str) -> tokio::runtime::Runtime {
    let mut builder = match flavor {
        tokio::runtime::RuntimeFlavor::CurrentThread => {
            tokio::runtime::Builder::new_current_thread()
        }
        _ => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(2);
            builder
        }
    };
    builder
        .thread_name(thread_name)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A pump turned by the fixture's ready descriptor through tokio's reactor, its 1 s timer only a
/// fallback.
fn fixture_readiness(fx: &FakeLoop) -> Builder {
    Pump::builder()
        .interval(Duration::from_secs(1))
        .run_on_readable(fx.ready_fd().expect("the fixture's ready descriptor"))
        .tokio_readiness(true)
}

fn readiness_turns_the_pump_long_before_its_timer(flavor: tokio::runtime::RuntimeFlavor) {
    const IDS: u32 = 200;
    let fx = Arc::new(FakeLoop::new(IDS));
    runtime(flavor, "ffi-readiness").block_on(async {
        let started = Instant::now();
        let pump = fixture_readiness(&fx)
            .build({
                let fx = fx.clone();
                move || fx.run_once().expect("not re-entered")
            })
            .expect("valid settings");
        pump.spawn_on(Backend::Tokio).expect("inside a runtime");
        let tasks: Vec<_> = (0..IDS)
            .map(|id| {
                let (pump, fx) = (pump.clone(), fx.clone());
                tokio::spawn(async move {
                    pump.wait_until(move || fx.check(id))
                        .timeout(Duration::from_secs(10))
                        .await
                })
            })
            .collect();
        for id in 0..IDS {
            fx.arm_in(id, Duration::from_millis(fastrand::u64(5..100)));
        }
        for task in tasks {
            assert_eq!(task.await.expect("task"), Ok(()));
        }
        // With only the 1 s timer, the first id could not be seen before 1 s.
        let elapsed = started.elapsed();
        assert!(
            elapsed < Duration::from_millis(900),
            "readiness did not turn the pump: {elapsed:?}"
        );
        let (calls, rounds) = calls_and_rounds(&pump, &fx).await;
        assert_eq!(calls, rounds);
        assert_clean(&fx);
        pump.close();
    });
}

#[test]
fn readiness_turns_the_pump_on_a_multi_thread_runtime() {
    readiness_turns_the_pump_long_before_its_timer(tokio::runtime::RuntimeFlavor::MultiThread);
}

#[test]
fn readiness_turns_the_pump_on_a_current_thread_runtime() {
    readiness_turns_the_pump_long_before_its_timer(tokio::runtime::RuntimeFlavor::CurrentThread);
}

#[test]
fn readiness_stays_level_triggered_without_spinning_on_a_cached_edge() {
    const SIGNALS: u64 = 20;
    runtime(tokio::runtime::RuntimeFlavor::MultiThread, WORKER).block_on(async {
        // The library's side: `run_once` consumes one byte per call, like a library that handles
        // one event per iteration.
        let (library_side, mut signal) = UnixStream::pair().expect("socket pair");
        library_side.set_nonblocking(true).expect("nonblocking");
        let consumed = Arc::new(AtomicU64::new(0));
        let pump = Pump::builder()
            .interval(Duration::MAX) // only readiness turns it
            .run_on_readable(&library_side)
            .tokio_readiness(true)
            .build({
                let consumed = consumed.clone();
                let mut library_side = library_side.try_clone().expect("dup");
                move || {
                    if let Ok(1) = library_side.read(&mut [0; 1]) {
                        consumed.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
            .expect("valid settings");
        pump.spawn_on(Backend::Tokio).expect("inside a runtime");
        let waiting = tokio::spawn({
            let pump = pump.clone();
            async move { pump.wait_until(|| false).await }
        });
        pending(&pump, 1).await;

        // Three bytes, one edge: the descriptor stays readable after each of the first two runs.
        signal.write_all(b"abc").expect("signal");
        let seen = consumed.clone();
        eventually("three runs for one edge", || {
            seen.load(Ordering::SeqCst) == 3
        })
        .await;

        // Drained: tokio still holds the edge it saw; the pump must neither run nor spin on it.
        let (rounds, ticks) = (pump.stats().rounds, cpu_ticks(Threads::Named(WORKER)));
        async_io::Timer::after(Duration::from_millis(300)).await;
        assert_eq!(pump.stats().rounds, rounds, "runs without readiness");
        let spent = cpu_ticks(Threads::Named(WORKER)) - ticks;
        assert!(spent < 10, "the workers spun for {spent} ticks in 300 ms");

        // Each new edge after a cleared one still turns the pump.
        for n in 4..4 + SIGNALS {
            signal.write_all(b"!").expect("signal");
            let seen = consumed.clone();
            eventually("a run for the new edge", || {
                seen.load(Ordering::SeqCst) == n
            })
            .await;
        }
        pump.close();
        assert_eq!(waiting.await.expect("task"), Err(Error::Closed));
    });
}

#[test]
fn a_runtime_without_io_fails_the_waits_with_a_trigger_error() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (library_side, _signal) = UnixStream::pair().expect("socket pair");
        let pump = Pump::builder()
            .run_on_readable(&library_side)
            .tokio_readiness(true)
            .build(|| {})
            .expect("valid settings");
        // tokio panics on the registration (its message is printed above this test's result);
        // the pump turns that into an error for every wait.
        pump.spawn_on(Backend::Tokio).expect("inside a runtime");
        let outcome = pump
            .wait_until(|| false)
            .or(async {
                async_io::Timer::after(Duration::from_secs(10)).await;
                panic!("the wait hung");
            })
            .await;
        assert!(
            matches!(
                outcome,
                Err(Error::Trigger(std::io::ErrorKind::Unsupported))
            ),
            "got {outcome:?}"
        );
    });
}

#[test]
fn tokio_readiness_is_refused_for_a_loop_on_its_own_thread() {
    let fx = Arc::new(FakeLoop::new(1));
    let refused = fixture_readiness(&fx).build_with_state(|_| Ok(|| {}), |run_once, _| run_once());
    assert!(
        matches!(&refused, Err(Error::InvalidConfig(why)) if why.contains("tokio_readiness")),
        "got {:?}",
        refused.map(drop)
    );
    let refused = Pump::builder()
        .run_on_readable(fx.ready_fd().expect("the fixture's ready descriptor"))
        .tokio_readiness(true)
        .build_with_state(|_| Ok(()), |_, _| None);
    assert!(
        matches!(&refused, Err(Error::InvalidConfig(why)) if why.contains("tokio_readiness")),
        "got {:?}",
        refused.map(drop)
    );
    let refused = Pump::builder().tokio_readiness(true).build(|| {});
    assert!(
        matches!(refused, Err(Error::InvalidConfig(why)) if why.contains("run_on_readable")),
        "tokio_readiness with no descriptor to watch: {refused:?}"
    );
}

#[test]
fn tokio_readiness_falls_back_to_async_io_on_other_executors() {
    let fx = Arc::new(FakeLoop::new(1));
    let pump = fixture_readiness(&fx)
        .build({
            let fx = fx.clone();
            move || fx.run_once().expect("not re-entered")
        })
        .expect("valid settings");
    pump.spawn_on(Backend::Smol).expect("smol is compiled in");
    let started = Instant::now();
    fx.arm_in(0, Duration::from_millis(20));
    let outcome = futures_lite::future::block_on(
        pump.wait_until(move || fx.check(0))
            .timeout(Duration::from_secs(10)),
    );
    assert_eq!(outcome, Ok(()));
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_millis(900),
        "async-io's readiness did not turn the pump on smol: {elapsed:?}"
    );
    pump.close();
}

#[test]
fn shutting_the_runtime_down_ends_waits_with_closed() {
    for tokio_readiness in [false, true] {
        let runtime = runtime(tokio::runtime::RuntimeFlavor::MultiThread, "ffi-shutdown");
        let (library_side, _signal) = UnixStream::pair().expect("socket pair");
        let pump = Pump::builder()
            .interval(Duration::MAX)
            .run_on_readable(&library_side)
            .tokio_readiness(tokio_readiness)
            .build(|| {})
            .expect("valid settings");
        runtime.block_on(async {
            pump.spawn_on(Backend::Tokio).expect("inside a runtime");
            // Registered and waiting for readiness once a wait is pending and served.
            pump.turn().await.expect("the pump runs");
        });
        // The wait lives outside the runtime, so only the pump task goes with it.
        let waiting = std::thread::spawn({
            let pump = pump.clone();
            move || {
                futures_lite::future::block_on(
                    pump.wait_until(|| false).timeout(Duration::from_secs(10)),
                )
            }
        });
        futures_lite::future::block_on(pending(&pump, 1));
        drop(runtime);
        let outcome = waiting.join().expect("the waiting thread");
        assert_eq!(
            outcome,
            Err(Error::Closed),
            "tokio_readiness({tokio_readiness})"
        );
    }
}

/// Found in review: a standby driver that takes over once the library closed its descriptor made
/// its own duplicate, which took the library's freed number; the look-up then found the very
/// file it looked for under that number, and the pump ran 50 000 times in 300 ms on a pipe whose
/// write end was written. Duplicates are now made past the library's number.
#[test]
fn a_driver_taking_over_after_the_library_closed_its_descriptor_stops_the_pump() {
    for tokio_readiness in [true, false] {
        let rt = runtime(tokio::runtime::RuntimeFlavor::MultiThread, "ffi-takeover");
        let (read, write) = rustix::pipe::pipe().expect("pipe");
        let runs = Arc::new(AtomicU64::new(0));
        let outcome = rt.block_on(async {
            let (pump, first, standby) =
                common::pump_with_a_standby_driver(&read, tokio_readiness, &runs).await;
            drop(read); // the library closes its read end
            first.abort();
            let _ = first.await; // the standby driver takes over
            pump.turn().await.expect("the standby driver runs it");
            common::wait_after_a_write(&pump, &write, standby).await
        });
        let runs = runs.load(Ordering::SeqCst);
        assert!(
            matches!(outcome, Err(Error::Trigger(_))) && runs < 50,
            "tokio_readiness({tokio_readiness}): {outcome:?} after {runs} runs"
        );
    }
}
