//! Cost of one `turn()` with 0 / 1 000 / 100 000 pending waits, of a round of the simple
//! registry (`compare`'s `simple-registry` peer: one `HashMap` under a mutex, `extract_if` after
//! the run) with as many, and of a wait whose condition already holds (the fast path).
//!
//! ```text
//! cargo bench -p ffi-pump-bench --bench turn
//! ```
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_executor::Executor;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use fake_loop::FakeLoop;
use ffi_pump::Pump;
use futures_lite::future::block_on;

/// A pump around the fixture whose timer never fires in a benchmark, so only `turn()` runs it.
fn pump(fx: &Arc<FakeLoop>) -> Pump {
    let fx = fx.clone();
    Pump::builder()
        .interval(Duration::from_secs(3600))
        .build(move || {
            let _ = fx.run_once();
        })
        .expect("valid settings")
}

fn turn(c: &mut Criterion) {
    let mut group = c.benchmark_group("turn");
    group.sample_size(20);
    for pending in [0_usize, 1_000, 100_000] {
        let fx = Arc::new(FakeLoop::new(1));
        let pump = pump(&fx);
        let executor = Arc::new(Executor::new());
        let (stop, stopped) = async_channel::bounded::<()>(1);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (executor, stopped) = (executor.clone(), stopped.clone());
                std::thread::spawn(move || block_on(executor.run(stopped.recv())))
            })
            .collect();
        executor.spawn(pump.run()).detach();
        let waits: Vec<_> = (0..pending)
            .map(|_| executor.spawn(pump.wait_until(|| false)))
            .collect();
        while pump.stats().pending_waits < pending {
            std::thread::yield_now();
        }
        group.bench_with_input(BenchmarkId::from_parameter(pending), &pending, |b, _| {
            b.iter(|| block_on(pump.turn()).expect("turn"));
        });
        pump.close();
        for wait in waits {
            let _ = block_on(wait);
        }
        drop(stop);
        for thread in threads {
            let stopped = thread.join().expect("executor thread");
            assert!(
                stopped.is_err(),
                "executor threads stop when the sender is dropped"
            );
        }
    }
    group.finish();
}

/// The simple registry's round: the loop and every pending check under one mutex.
fn simple_round(c: &mut Criterion) {
    let mut group = c.benchmark_group("simple registry round");
    group.sample_size(20);
    for pending in [0_usize, 1_000, 100_000] {
        let fx = Arc::new(FakeLoop::new(1));
        let noop = std::task::Waker::noop();
        let waits: Mutex<HashMap<u64, (u32, std::task::Waker)>> = Mutex::new(
            (0..pending as u64)
                .map(|key| (key, (0, noop.clone())))
                .collect(),
        );
        let mut woken = Vec::new();
        group.bench_with_input(BenchmarkId::from_parameter(pending), &pending, |b, _| {
            b.iter(|| {
                let mut waits = waits.lock().expect("not poisoned");
                let _ = fx.run_once();
                woken.extend(
                    waits
                        .extract_if(|_, (id, _)| fx.check(*id))
                        .map(|(_, (_, waker))| waker),
                );
                drop(waits);
                woken.drain(..).for_each(std::task::Waker::wake);
            });
        });
    }
    group.finish();
}

fn fast_path(c: &mut Criterion) {
    let fx = Arc::new(FakeLoop::new(1));
    let pump = pump(&fx);
    pump.spawn_on(ffi_pump::Backend::Thread)
        .expect("pump thread");
    c.bench_function("wait_until ready on first check", |b| {
        b.iter(|| block_on(pump.wait_until(|| true)).expect("ready"));
    });
    pump.close();
}

criterion_group!(benches, turn, simple_round, fast_path);
criterion_main!(benches);
