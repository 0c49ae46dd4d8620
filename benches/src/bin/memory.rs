//! Bytes that ffi-pump owns per pending wait: the wait future (`size_of`) plus what the wait
//! allocated on the heap (a counting allocator, this thread's allocations only).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use ffi_pump::{Backend, Completions, Pump, Strategy};
use serde::{Deserialize, Serialize};

thread_local! {
    static ALLOCATED: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: the thread-local is gone while the thread shuts down.
    let _ = ALLOCATED.try_with(|allocated| allocated.set(allocated.get() + delta));
}

/// The system allocator, counting the live bytes allocated by each thread.
struct Counting;

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s contract;
// the counting only touches a const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: same layout, same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes through
        // `alloc` or `realloc` above).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: as for `dealloc`, and `new_size` comes from our caller under the same contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated() -> isize {
    ALLOCATED.with(Cell::get)
}

/// One kind of wait.
#[derive(Debug, Serialize, Deserialize)]
pub struct Row {
    /// Which wait.
    pub wait: String,
    /// `size_of` the wait future.
    pub future_bytes: usize,
    /// Heap bytes per pending wait (registry slot, shared slot, table entry, listener).
    pub heap_bytes_per_wait: f64,
}

/// Every kind of wait.
#[derive(Debug, Serialize, Deserialize)]
pub struct Bytes {
    /// Pending waits measured per kind.
    pub waits: usize,
    /// One row per kind.
    pub rows: Vec<Row>,
}

/// Creates `n` waits with `make`, polls each once (they become pending), lets the pump take them
/// in with one `turn()`, and counts the heap bytes still held per wait.
fn per_wait<F: Future + Unpin>(pump: &Pump, n: usize, mut make: impl FnMut(u32) -> F) -> f64 {
    let mut waits: Vec<F> = Vec::with_capacity(n);
    let mut cx = Context::from_waker(Waker::noop());
    let before = allocated();
    for id in 0..n as u32 {
        let mut wait = make(id);
        assert!(
            Pin::new(&mut wait).poll(&mut cx).is_pending(),
            "the wait is pending"
        );
        waits.push(wait);
    }
    futures_lite::future::block_on(pump.turn()).expect("turn");
    let per_wait = (allocated() - before) as f64 / n as f64;
    assert_eq!(
        pump.stats().pending_waits,
        n,
        "all waits pending while measured"
    );
    drop(waits);
    per_wait
}

/// Measures every kind of wait with `n` pending waits.
pub fn measure(n: usize) -> Bytes {
    let build = |strategy| {
        let pump = Pump::builder()
            .interval(Duration::from_secs(3600))
            .strategy(strategy)
            .build(|| {})
            .expect("valid settings");
        pump.spawn_on(Backend::Thread).expect("pump thread");
        pump
    };
    let mut rows = Vec::new();

    let pump = build(Strategy::PumpEvaluated);
    let heap = per_wait(&pump, n, |id| pump.wait_until(move || id == u32::MAX));
    rows.push(Row {
        wait: "wait_until, pump-evaluated (default)".into(),
        future_bytes: std::mem::size_of_val(&pump.wait_until(|| false)),
        heap_bytes_per_wait: heap,
    });

    let pump = build(Strategy::Broadcast);
    let heap = per_wait(&pump, n, |id| pump.wait_until(move || id == u32::MAX));
    rows.push(Row {
        wait: "wait_until, broadcast".into(),
        future_bytes: std::mem::size_of_val(&pump.wait_until(|| false)),
        heap_bytes_per_wait: heap,
    });

    let pump = build(Strategy::PumpEvaluated);
    let table = Completions::<u32, ()>::new();
    let heap = per_wait(&pump, n, |id| pump.wait_key(&table, id));
    rows.push(Row {
        wait: "wait_key (completion-driven)".into(),
        future_bytes: std::mem::size_of_val(&pump.wait_key(&table, 0_u32)),
        heap_bytes_per_wait: heap,
    });

    Bytes { waits: n, rows }
}
