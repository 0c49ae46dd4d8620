//! Bad or odd input: each gets a clear error or a documented behaviour, never a panic or a hang.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_clean, calls_and_rounds, fixture_spread};
use fake_loop::FakeLoop;
use ffi_pump::{Backend, Error, Pump};

on_every_backend! {
    fn an_interval_too_long_for_the_clock_means_no_ticks(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().interval(Duration::MAX), &fx);
            let never = pump.wait_until(|| false).timeout(Duration::from_millis(200)).await;
            assert_eq!(never, Err(Error::TimedOut));
            assert_eq!(fx.stats().calls, 0, "a timer that never fires ran the loop");
            fx.arm_in(0, Duration::ZERO);
            pump.kick();
            let check = fx.clone();
            pump.wait_until(move || check.check(0))
                .timeout(Duration::from_secs(10))
                .await
                .expect("kick still runs the loop");
            let calls = fx.stats().calls;
            pump.turn().await.expect("a turn still runs the loop");
            assert!(fx.stats().calls > calls, "the turn made no run");
        });
    }

    fn a_timeout_of_duration_max_never_fires(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder(), &fx);
            fx.arm_in(0, Duration::from_millis(20));
            let check = fx.clone();
            let outcome = pump.wait_until(move || check.check(0)).timeout(Duration::MAX).await;
            assert_eq!(outcome, Ok(()));
        });
    }

    fn a_deadline_in_the_past_times_out_at_once(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder(), &fx);
            let started = Instant::now();
            let past = started.checked_sub(Duration::from_secs(1)).unwrap_or(started);
            assert_eq!(pump.wait_until(|| false).deadline(past).await, Err(Error::TimedOut));
            assert!(started.elapsed() < Duration::from_secs(1));
        });
    }

    fn kick_after_close_does_nothing(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder(), &fx);
            pump.close();
            let before = pump.stats();
            pump.kick();
            pump.kick();
            // What a kick would cause comes after it: given time to, nothing came.
            async_io::Timer::after(Duration::from_millis(100)).await;
            assert_eq!(pump.stats(), before, "a kick changed a closed pump");
            assert_eq!(pump.turn().await, Err(Error::Closed));
            assert_eq!(fx.stats().calls, 0);
        });
    }

    fn spawning_twice_still_runs_the_loop_once_at_a_time(rt: Rt) {
        let fx = fixture_spread(2_000, Duration::from_millis(100));
        rt.block_on(async {
            let started = Instant::now();
            let pump = rt.pump(Pump::builder(), &fx);
            // A second driver on top of the backend's: it stands by.
            pump.spawn_on(Backend::Thread).expect("second driver");
            pump.spawn();
            let tasks: Vec<_> = (0..2_000)
                .map(|id| {
                    let (pump, fx) = (pump.clone(), fx.clone());
                    rt.spawn(async move { pump.wait_until(move || fx.check(id)).timeout(Duration::from_secs(30)).await })
                })
                .collect();
            for task in tasks {
                assert_eq!(task.await, Ok(()));
            }
            let (calls, rounds) = calls_and_rounds(&pump, &fx).await;
            assert_eq!(calls, rounds);
            // At most one run per 1 ms interval, not one per driver (three ticking side by side
            // would make about three).
            let ms = started.elapsed().as_millis() as u64;
            assert!(rounds * 2 <= ms * 3 + 20, "{rounds} rounds in {ms} ms: drivers ticked side by side");
            assert_clean(&fx);
        });
    }
}

#[test]
fn run_polled_on_two_executors_at_once_keeps_one_run_at_a_time() {
    let fx = fixture_spread(2_000, Duration::from_millis(100));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let run_fx = fx.clone();
    let pump = Pump::new(move || run_fx.run_once().expect("not re-entered"));
    let on_tokio = runtime.spawn(pump.run());
    let on_smol = smol::spawn(pump.run());
    smol::block_on(async {
        let tasks: Vec<_> = (0..2_000)
            .map(|id| {
                let (pump, fx) = (pump.clone(), fx.clone());
                smol::spawn(async move {
                    pump.wait_until(move || fx.check(id))
                        .timeout(Duration::from_secs(30))
                        .await
                })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await, Ok(()));
        }
        let (calls, rounds) = calls_and_rounds(&pump, &fx).await;
        assert_eq!(calls, rounds);
        assert_clean(&fx);
        pump.close();
        on_smol.await;
    });
    runtime
        .block_on(on_tokio)
        .expect("the tokio driver ends with the pump");
}

/// `Err(InvalidConfig)` whose text names `setting`.
fn refused<T>(outcome: Result<T, Error>, setting: &str) {
    match outcome {
        Err(Error::InvalidConfig(why)) if why.contains(setting) => {}
        Err(other) => panic!("refused, but not for {setting}: {other:?}"),
        Ok(_) => panic!("built although {setting} cannot apply"),
    }
}

/// Every setting a pump cannot apply is refused by `build`, naming it, instead of ignored.
#[test]
fn settings_a_pump_cannot_apply_are_refused_by_name() {
    let interval = || Pump::builder().interval(Duration::from_millis(5));
    refused(interval().build(|| None), "interval");
    refused(
        interval().build_with_state(|_| Ok(()), |_, _| None),
        "interval",
    );
    #[cfg(any(target_os = "linux", target_os = "android"))]
    refused(
        interval().build_with_state(|setup| Ok(setup.descriptors()?), |_, _| None),
        "interval",
    );
    let no_budget = || Pump::builder().check_budget(Duration::ZERO);
    refused(no_budget().build(|| {}), "check_budget");
    refused(no_budget().build(|| None), "check_budget");
    refused(
        no_budget().build_with_state(|_| Ok(|| {}), |run_once, _| run_once()),
        "check_budget",
    );
    refused(
        no_budget().build_with_state(|_| Ok(()), |_, _| None),
        "check_budget",
    );
    // Found by a hostile probe: a broadcast pump evaluates no checks, and took a budget silently.
    let broadcast_budget = || {
        Pump::builder()
            .strategy(ffi_pump::Strategy::Broadcast)
            .check_budget(Duration::from_millis(2))
    };
    refused(broadcast_budget().build(|| {}), "check_budget");
    refused(broadcast_budget().build(|| None), "check_budget");
    refused(
        broadcast_budget().build_with_state(|_| Ok(()), |_, _| None),
        "check_budget",
    );
    assert!(Pump::builder()
        .strategy(ffi_pump::Strategy::Broadcast)
        .build(|| {})
        .is_ok());
    // A descriptor set beside `run_on_readable`: the factory asks for the set and is refused,
    // naming the setting (an io error of kind `InvalidInput`, which comes back from the build as
    // the factory's error: the set is made in the factory now, not before it).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let (library_side, _peer) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        let outcome = Pump::builder()
            .run_on_readable(&library_side)
            .build_with_state(|setup| Ok(setup.descriptors()?), |_, _| None);
        match outcome {
            Err(Error::Factory(why)) => {
                let io = why
                    .downcast_ref::<std::io::Error>()
                    .unwrap_or_else(|| panic!("refused with {why:?}, not an io::Error"));
                assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput, "{io}");
                assert!(io.to_string().contains("run_on_readable"), "{io}");
            }
            Err(other) => panic!("refused, but not for run_on_readable: {other:?}"),
            Ok(_) => panic!("built although run_on_readable cannot apply beside a set"),
        }
    }
    // The settings each builder does use still build.
    assert!(interval().build(|| {}).is_ok());
    let (pump, _loop) = interval()
        .build_with_state(|_| Ok(|| {}), |run_once, _| run_once())
        .expect("ticks on its thread");
    pump.close();
    let (pump, _handle) = Pump::builder()
        .check_budget(Duration::from_millis(2))
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("a budget applies to every pump-evaluated pump");
    pump.close();
}

/// `build` refuses a descriptor it cannot watch with `Error::Trigger`, as its docs now say
/// (they listed `InvalidConfig` only): epoll refuses a regular file.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn build_refuses_a_descriptor_it_cannot_watch_with_trigger() {
    let file = std::fs::File::open(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("the manifest");
    let built = Pump::builder().run_on_readable(&file).build(|| {});
    assert!(
        matches!(
            built,
            Err(Error::Trigger(std::io::ErrorKind::PermissionDenied))
        ),
        "got {:?}",
        built.map(|_| ())
    );
}
