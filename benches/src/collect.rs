//! When each waiter saw its id done, gathered without a join handle per waiter.
//!
//! Awaiting 100 000 join handles one by one wakes the awaiting thread up to 100 000 times; that
//! cost would land in every approach's CPU figure and hide their differences. Each waiter writes
//! its own slot instead, and only the last one wakes the collector.
//!
//! It also counts the waiters that have started waiting, so ids are armed only once every waiter
//! is in place: otherwise the first ids fall due while thousands of tasks still wait for their
//! first poll, and that queueing, which no approach can avoid, would be counted as its latency.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use event_listener::{Event, Listener};
use fake_loop::now_ns;

use crate::usage::{self, Usage};

/// The process's usage when the last waiter of a collector recorded (each cell runs in a
/// process of its own).
static FINISHED: Mutex<Option<Usage>> = Mutex::new(None);

/// The process's usage when the last waiter of the last collector recorded, if one has.
pub fn finished() -> Option<Usage> {
    *FINISHED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One slot per id, and how many are still empty.
#[derive(Debug)]
pub struct Collector {
    seen: Vec<AtomicU64>,
    left: AtomicUsize,
    done: Event,
    /// Waiters that have not started waiting yet.
    to_start: AtomicUsize,
    started: Event,
}

impl Collector {
    /// A collector for ids `0..n`.
    pub fn new(n: u32) -> Arc<Collector> {
        Arc::new(Collector {
            seen: (0..n).map(|_| AtomicU64::new(0)).collect(),
            left: AtomicUsize::new(n as usize),
            done: Event::new(),
            to_start: AtomicUsize::new(n as usize),
            started: Event::new(),
        })
    }

    /// Records that one waiter is about to poll its wait for the first time.
    pub fn start(&self) {
        if self.to_start.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.started.notify(usize::MAX);
        }
    }

    /// Waits until every waiter has [`start`](Collector::start)ed; at once when the workload
    /// [arms early](crate::arms_early).
    pub async fn all_started(&self) {
        if crate::arms_early() {
            return;
        }
        loop {
            let listener = self.started.listen();
            if self.to_start.load(Ordering::SeqCst) == 0 {
                return;
            }
            listener.await;
        }
    }

    /// [`all_started`](Collector::all_started) for a thread outside any runtime.
    pub fn all_started_blocking(&self) {
        if crate::arms_early() {
            return;
        }
        loop {
            let listener = self.started.listen();
            if self.to_start.load(Ordering::SeqCst) == 0 {
                return;
            }
            listener.wait();
        }
    }

    /// Records that the waiter of `id` saw it done, now.
    pub fn record(&self, id: u32) {
        self.seen[id as usize].store(now_ns(), Ordering::SeqCst);
        if self.left.fetch_sub(1, Ordering::SeqCst) == 1 {
            *FINISHED.lock().unwrap_or_else(PoisonError::into_inner) = Some(usage::now());
            self.done.notify(usize::MAX);
        }
    }

    /// Waits until every id was recorded; when each was seen ([`now_ns`] clock), by id.
    pub async fn all(&self) -> Vec<u64> {
        loop {
            let listener = self.done.listen();
            if self.left.load(Ordering::SeqCst) == 0 {
                break;
            }
            listener.await;
        }
        self.seen.iter().map(|t| t.load(Ordering::SeqCst)).collect()
    }

    /// [`all`](Collector::all) for a thread outside any runtime.
    pub fn all_blocking(&self) -> Vec<u64> {
        loop {
            let listener = self.done.listen();
            if self.left.load(Ordering::SeqCst) == 0 {
                break;
            }
            listener.wait();
        }
        self.seen.iter().map(|t| t.load(Ordering::SeqCst)).collect()
    }
}
