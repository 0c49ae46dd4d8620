//! Cost of one `turn()` with 0 / 1 000 / 100 000 pending waits, of a round of the simple
//! registry (`compare`'s `simple-registry` peer: one `HashMap` under a mutex, `extract_if` after
//! the run) with as many, of a wait whose condition already holds (the fast path), and of a wait's
//! whole life (made, registered, completed by a round, polled to its end, dropped) in both.
//!
//! ```text
//! cargo bench -p ffi-pump-bench --bench turn
//! ```
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_executor::Executor;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use fake_loop::FakeLoop;
use ffi_pump::Pump;
use ffi_pump_bench::peers::{SimpleLoop, SimpleRegistry};
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

/// The simple registry's round (`compare`'s peer): the loop and every pending check under one
/// mutex.
fn simple_round(c: &mut Criterion) {
    let mut group = c.benchmark_group("simple registry round");
    group.sample_size(20);
    let mut cx = Context::from_waker(Waker::noop());
    for pending in [0_usize, 1_000, 100_000] {
        let registry = Arc::new(SimpleRegistry::new(Arc::new(FakeLoop::new(1))));
        // Id 0 is never armed: every wait stays pending.
        let mut waits: Vec<_> = (0..pending).map(|_| Box::pin(registry.wait(0))).collect();
        for wait in &mut waits {
            assert!(wait.as_mut().poll(&mut cx).is_pending());
        }
        let mut woken = Vec::new();
        group.bench_with_input(BenchmarkId::from_parameter(pending), &pending, |b, _| {
            b.iter(|| registry.round(&mut woken));
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

/// Waits per iteration of the "wait life" benches.
const LIVES: usize = 1_000;

/// One flag per id: what both sides of the "wait life" benches check (the fixture cannot make an
/// id pending again, and an iteration needs `LIVES` fresh ones).
struct Flags(Vec<AtomicBool>);

impl Flags {
    fn set_all(&self, done: bool) {
        self.0.iter().for_each(|d| d.store(done, Ordering::Relaxed));
    }

    fn is_done(&self, id: u32) -> bool {
        self.0[id as usize].load(Ordering::Relaxed)
    }
}

impl SimpleLoop for Flags {
    fn run_once(&self) {}

    fn check(&self, id: u32) -> bool {
        self.is_done(id)
    }
}

/// A wait's whole life, `LIVES` at a time on one thread: each made and polled once (its check
/// fails, it registers), then every condition made true, one round, each polled to its end and
/// dropped. The pump's round is a `turn()`; the simple registry's is its round (`compare`'s peer).
fn wait_life(c: &mut Criterion) {
    let mut group = c.benchmark_group("wait life");
    group.sample_size(20);
    let flags = Arc::new(Flags((0..LIVES).map(|_| AtomicBool::new(false)).collect()));
    let mut cx = Context::from_waker(Waker::noop());

    let pump = pump(&Arc::new(FakeLoop::new(1)));
    pump.spawn_on(ffi_pump::Backend::Thread)
        .expect("pump thread");
    group.bench_function(BenchmarkId::new("ffi-pump", LIVES), |b| {
        b.iter(|| {
            flags.set_all(false);
            let mut waits: Vec<_> = (0..LIVES as u32)
                .map(|id| {
                    let flags = flags.clone();
                    Box::pin(pump.wait_until(move || flags.is_done(id)))
                })
                .collect();
            for wait in &mut waits {
                assert!(wait.as_mut().poll(&mut cx).is_pending());
            }
            flags.set_all(true);
            block_on(pump.turn()).expect("turn");
            for wait in &mut waits {
                assert!(matches!(wait.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
            }
        });
    });
    pump.close();

    let registry = Arc::new(SimpleRegistry::new(flags.clone()));
    let mut woken = Vec::new();
    group.bench_function(BenchmarkId::new("simple registry", LIVES), |b| {
        b.iter(|| {
            flags.set_all(false);
            let mut waits: Vec<_> = (0..LIVES as u32)
                .map(|id| Box::pin(registry.wait(id)))
                .collect();
            for wait in &mut waits {
                assert!(wait.as_mut().poll(&mut cx).is_pending());
            }
            flags.set_all(true);
            registry.round(&mut woken);
            for wait in &mut waits {
                assert!(wait.as_mut().poll(&mut cx).is_ready());
            }
        });
    });
    group.finish();
}

criterion_group!(benches, turn, simple_round, fast_path, wait_life);
criterion_main!(benches);
