//! Cost of one `turn()` with 0 / 1 000 / 100 000 pending waits, of a round of the simple
//! registry (`compare`'s `simple-registry` peer: one `HashMap` under a mutex, `extract_if` after
//! the run) with as many, of a wait whose condition already holds (the fast path), and of a wait's
//! whole life (made, registered, completed by a round, polled to its end, dropped) in both.
//!
//! ```text
//! cargo bench -p ffi-pump-bench --bench turn
//! ```
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
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

/// Waits per iteration of the "wait life" benches.
const LIVES: usize = 1_000;

/// A wait's whole life, `LIVES` at a time on one thread: each made and polled once (its check
/// fails, it registers), then every condition made true, one round, each polled to its end and
/// dropped. The pump's round is a `turn()`; the simple registry's is its `extract_if`.
fn wait_life(c: &mut Criterion) {
    let mut group = c.benchmark_group("wait life");
    group.sample_size(20);
    let done: Arc<Vec<AtomicBool>> = Arc::new((0..LIVES).map(|_| AtomicBool::new(false)).collect());
    let reset = || done.iter().for_each(|d| d.store(false, Ordering::Relaxed));
    let finish = || done.iter().for_each(|d| d.store(true, Ordering::Relaxed));
    let mut cx = Context::from_waker(Waker::noop());

    let pump = pump(&Arc::new(FakeLoop::new(1)));
    pump.spawn_on(ffi_pump::Backend::Thread)
        .expect("pump thread");
    group.bench_function(BenchmarkId::new("ffi-pump", LIVES), |b| {
        b.iter(|| {
            reset();
            let mut waits: Vec<_> = (0..LIVES)
                .map(|id| {
                    let done = done.clone();
                    Box::pin(pump.wait_until(move || done[id].load(Ordering::Relaxed)))
                })
                .collect();
            for wait in &mut waits {
                assert!(wait.as_mut().poll(&mut cx).is_pending());
            }
            finish();
            block_on(pump.turn()).expect("turn");
            for wait in &mut waits {
                assert!(matches!(wait.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
            }
        });
    });
    pump.close();

    let registry = Arc::new(Simple::default());
    group.bench_function(BenchmarkId::new("simple registry", LIVES), |b| {
        b.iter(|| {
            reset();
            let mut waits: Vec<_> = (0..LIVES)
                .map(|id| {
                    Box::pin(SimpleWait {
                        registry: registry.clone(),
                        done: done.clone(),
                        id,
                        key: None,
                    })
                })
                .collect();
            for wait in &mut waits {
                assert!(wait.as_mut().poll(&mut cx).is_pending());
            }
            finish();
            let woken: Vec<Waker> = {
                let mut waits = registry.waits.lock().expect("not poisoned");
                waits
                    .extract_if(|_, (id, _)| done[*id].load(Ordering::Relaxed))
                    .map(|(_, (_, waker))| waker)
                    .collect()
            };
            woken.into_iter().for_each(Waker::wake);
            for wait in &mut waits {
                assert!(wait.as_mut().poll(&mut cx).is_ready());
            }
        });
    });
    group.finish();
}

/// The simple registry of `compare`'s peer, its waits on flags.
#[derive(Default)]
struct Simple {
    waits: Mutex<HashMap<u64, (usize, Waker)>>,
    next_key: AtomicU64,
}

/// Checks once under the registry's mutex, then registers; done once its key was taken out.
struct SimpleWait {
    registry: Arc<Simple>,
    done: Arc<Vec<AtomicBool>>,
    id: usize,
    key: Option<u64>,
}

impl Future for SimpleWait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let registry = self.registry.clone();
        let mut waits = registry.waits.lock().expect("not poisoned");
        match self.key {
            None if self.done[self.id].load(Ordering::Relaxed) => Poll::Ready(()),
            None => {
                let key = registry.next_key.fetch_add(1, Ordering::Relaxed);
                waits.insert(key, (self.id, cx.waker().clone()));
                self.key = Some(key);
                Poll::Pending
            }
            Some(key) => match waits.get(&key) {
                None => {
                    self.key = None;
                    Poll::Ready(())
                }
                Some(_) => Poll::Pending,
            },
        }
    }
}

impl Drop for SimpleWait {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.registry
                .waits
                .lock()
                .expect("not poisoned")
                .remove(&key);
        }
    }
}

criterion_group!(benches, turn, simple_round, fast_path, wait_life);
criterion_main!(benches);
