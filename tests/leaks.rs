//! Pumps made and dropped by the thousand leave no thread and no descriptor behind.
//!
//! A file of its own, its tests run one at a time: they count the threads and descriptors of the
//! whole process, which tests running beside them would change.
#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use std::os::unix::net::UnixStream;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ffi_pump::{Backend, Pump};

/// How many pumps of each kind a test makes and drops.
const N: usize = 10_000;

/// How far above the baseline the counts may settle: a thread or descriptor a runtime starts or
/// opens on its own schedule.
const SLACK: usize = 2;

/// One test at a time in this file.
fn alone() -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

/// This process's threads and open descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Footprint {
    threads: usize,
    descriptors: usize,
}

fn footprint() -> Footprint {
    let count = |dir: &str| {
        std::fs::read_dir(dir)
            .unwrap_or_else(|err| panic!("{dir}: {err}"))
            .count()
    };
    Footprint {
        threads: count("/proc/self/task"),
        descriptors: count("/proc/self/fd"),
    }
}

impl Footprint {
    fn within(self, baseline: Footprint) -> bool {
        self.threads <= baseline.threads + SLACK && self.descriptors <= baseline.descriptors + SLACK
    }
}

/// Waits until the process's threads and descriptors are back within `SLACK` of `baseline`
/// (pump threads end, and drop their loops, on their own after the pump closes); fails, saying
/// what it saw, if they are not after 20 s.
async fn back_to(baseline: Footprint, after: &str) {
    let started = Instant::now();
    loop {
        let now = footprint();
        if now.within(baseline) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "after {after}: {now:?}, 20 s on, against {baseline:?} before (slack {SLACK})"
        );
        async_io::Timer::after(Duration::from_millis(5)).await;
    }
}

on_every_backend! {
    fn ten_thousand_pumps_made_and_dropped_leave_no_thread_or_descriptor_behind(rt: Rt) {
        let _alone = alone();
        let (library_side, _signal) = UnixStream::pair().expect("socket pair");
        rt.block_on(async {
            // Half of them keep a duplicate of a descriptor to watch (`run_on_readable`).
            let make = |i: usize| {
                let builder = match i % 2 {
                    0 => Pump::builder(),
                    _ => Pump::builder().run_on_readable(&library_side),
                };
                rt.pump_with(builder, || {})
            };
            // What starts once, up front: the runtime's threads, async-io's reactor and thread.
            for i in 0..2 {
                let pump = make(i);
                pump.turn().await.expect("a new pump turns");
                pump.close();
                pump.closed().await.expect("closed from outside the pump");
            }
            let baseline = footprint();
            for i in 0..N {
                let pump = make(i);
                pump.turn().await.expect("a new pump turns");
                drop(pump);
            }
            back_to(baseline, &format!("{N} pumps made, turned and dropped on {rt:?}")).await;
        });
    }
}

#[test]
fn ten_thousand_loop_thread_pumps_of_each_kind_made_and_dropped_leave_no_thread_or_descriptor_behind(
) {
    let _alone = alone();
    async_io::block_on(async {
        // One up front: async-io's reactor and thread start once.
        let (pump, _loop) = Pump::builder()
            .build_with_state(|setup| Ok(setup.descriptors()?), |_, _| None)
            .expect("a pump thread starts");
        pump.turn().await.expect("a new pump turns");
        pump.close();
        pump.closed().await.expect("closed from outside the pump");
        let baseline = footprint();
        for _ in 0..N {
            let (pump, handle) = Pump::builder()
                .build_with_state(|_| Ok(()), |_, _| None)
                .expect("a pump thread starts");
            pump.turn().await.expect("a new pump turns");
            drop((pump, handle));

            // Each has an epoll set of its own.
            let (pump, handle) = Pump::builder()
                .build_with_state(|setup| Ok(setup.descriptors()?), |_, _| None)
                .expect("a pump thread starts");
            pump.turn().await.expect("a new pump turns");
            drop((pump, handle));

            let pump = Pump::new(|| {});
            pump.spawn_on(Backend::Thread)
                .expect("a pump thread starts");
            pump.turn().await.expect("a new pump turns");
            drop(pump);
        }
        back_to(
            baseline,
            &format!(
                "{N} pumps each of build_with_state without and with a descriptor set and \
                 spawn_on(Backend::Thread) made, turned and dropped"
            ),
        )
        .await;
    });
}
