//! The registry of pump-evaluated waits: type-erased checks that the pump evaluates right after
//! each run, waking only the waits whose check succeeded.
//!
//! Waits register into a short `incoming` list, so registering never waits for an evaluation in
//! progress; the next holder of the loop lock moves them into the slab and evaluates them (see
//! [`Shared::settle`](crate::shared::Shared::settle)). A wait that gives up only marks its entry
//! cancelled; the pump drops it when it next meets it, or when it goes idle. User code other than
//! the checks (the drop of what a check captured) never runs under these locks.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::sync::{lock, AtomicBool, Mutex, MutexGuard};

/// A registered check, as the pump sees it.
pub(crate) trait Evaluate: Send + Sync {
    /// Runs the check once, unless the wait gave up. `Some(waker)` when the entry is finished
    /// (completed, its check panicked, or cancelled): the pump removes it and wakes the waker.
    fn evaluate(&self) -> Option<Option<Waker>>;

    /// Whether the wait gave up on this entry.
    fn is_cancelled(&self) -> bool;

    /// The waker of a wait that will never complete, because the pump closed.
    fn abandon(&self) -> Option<Waker>;
}

/// The registry's side of a wait, shared with the wait's future.
pub(crate) type Entry = Arc<dyn Evaluate>;

/// Entries evaluated between two looks at the clock.
const CLOCK_STRIDE: usize = 64;

#[derive(Default)]
struct Incoming {
    entries: Vec<Entry>,
    closed: bool,
}

#[derive(Default)]
struct Slab {
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
    len: usize,
    /// Where the last evaluation stopped for lack of time.
    cursor: usize,
}

impl Slab {
    fn insert(&mut self, entry: Entry) -> usize {
        self.len += 1;
        match self.free.pop() {
            Some(key) => {
                self.entries[key] = Some(entry);
                key
            }
            None => {
                self.entries.push(Some(entry));
                self.entries.len() - 1
            }
        }
    }

    /// Evaluates the entry under `key`, moving a finished one to `finished` and its waker to
    /// `woken`.
    fn evaluate(&mut self, key: usize, woken: &mut Vec<Waker>, finished: &mut Vec<Entry>) {
        let Some(entry) = &self.entries[key] else {
            return;
        };
        if let Some(waker) = entry.evaluate() {
            finished.extend(self.remove(key));
            woken.extend(waker);
        }
    }

    fn remove(&mut self, key: usize) -> Option<Entry> {
        let entry = self.entries[key].take();
        if entry.is_some() {
            self.free.push(key);
            self.len -= 1;
        }
        entry
    }

    /// Gives back the memory of a past burst of waits once none is left.
    fn shrink_if_empty(&mut self) {
        if self.len == 0 && !self.entries.is_empty() {
            *self = Slab::default();
        }
    }
}

#[derive(Default)]
pub(crate) struct Registry {
    incoming: Mutex<Incoming>,
    /// Whether `incoming` holds entries nobody has evaluated yet; changed under its lock.
    arrived: AtomicBool,
    slab: Mutex<Slab>,
}

impl Registry {
    /// Registers an entry not evaluated yet, in O(1); hands it back if the pump is closed.
    ///
    /// The caller then calls [`Shared::settle`](crate::shared::Shared::settle), so the entry is
    /// evaluated without waiting for the next run.
    pub(crate) fn insert(&self, entry: Entry) -> Result<(), Entry> {
        let mut incoming = lock(&self.incoming);
        if incoming.closed {
            return Err(entry);
        }
        incoming.entries.push(entry);
        self.arrived.store(true, SeqCst);
        Ok(())
    }

    /// Registers an entry that was just evaluated under the loop lock, which the caller still
    /// holds: nobody evaluates the slab meanwhile, so this does not wait.
    pub(crate) fn insert_evaluated(&self, entry: Entry) -> Result<(), Entry> {
        let incoming = lock(&self.incoming);
        if incoming.closed {
            return Err(entry);
        }
        lock(&self.slab).insert(entry);
        Ok(())
    }

    /// Whether entries registered since the last evaluation wait for their first one.
    pub(crate) fn has_arrivals(&self) -> bool {
        self.arrived.load(SeqCst)
    }

    /// Moves the registered entries into the slab and returns it locked, with their keys added
    /// to `keys` if given.
    ///
    /// The incoming lock is held until the entries are in the slab, so a concurrent
    /// [`close`](Registry::close) finds them in one place or the other, never in transit.
    fn admit(&self, mut keys: Option<&mut Vec<usize>>) -> MutexGuard<'_, Slab> {
        let mut incoming = lock(&self.incoming);
        let mut slab = lock(&self.slab);
        self.arrived.store(false, SeqCst);
        // Taken, not drained: a burst of registrations does not keep its memory.
        for entry in std::mem::take(&mut incoming.entries) {
            let key = slab.insert(entry);
            if let Some(keys) = keys.as_mut() {
                keys.push(key);
            }
        }
        drop(incoming);
        slab
    }

    /// Evaluates the entries registered since the last evaluation, only those.
    pub(crate) fn evaluate_arrivals(&self, woken: &mut Vec<Waker>, finished: &mut Vec<Entry>) {
        let mut keys = Vec::new();
        let mut slab = self.admit(Some(&mut keys));
        for key in keys {
            slab.evaluate(key, woken, finished);
        }
    }

    /// Evaluates entries, starting where the last evaluation stopped, until all were seen or
    /// `budget` is spent. The wakers of the completed ones go to `woken`, the finished entries to
    /// `finished`, to be dropped by the caller once no lock is held.
    pub(crate) fn evaluate(
        &self,
        budget: Duration,
        woken: &mut Vec<Waker>,
        finished: &mut Vec<Entry>,
    ) {
        let mut slab = self.admit(None);
        if slab.len == 0 {
            slab.shrink_if_empty();
            return;
        }
        let deadline = Instant::now().checked_add(budget);
        let size = slab.entries.len();
        let start = slab.cursor % size;
        for step in 0..size {
            let key = (start + step) % size;
            if step % CLOCK_STRIDE == CLOCK_STRIDE - 1
                && deadline.is_some_and(|d| Instant::now() >= d)
            {
                slab.cursor = key;
                return;
            }
            slab.evaluate(key, woken, finished);
        }
        slab.cursor = start;
    }

    /// Drops the entries of waits that gave up: for a pump going idle, which evaluates nothing
    /// until the next wait.
    pub(crate) fn sweep(&self) {
        let mut slab = self.admit(None);
        let mut cancelled = Vec::new();
        for key in 0..slab.entries.len() {
            if slab.entries[key].as_ref().is_some_and(|e| e.is_cancelled()) {
                cancelled.extend(slab.remove(key));
            }
        }
        slab.shrink_if_empty();
        drop(slab);
        drop(cancelled);
    }

    /// Refuses new entries and takes every entry out, returning the wakers of their waits.
    pub(crate) fn close(&self) -> Vec<Waker> {
        let arrived = {
            let mut incoming = lock(&self.incoming);
            incoming.closed = true;
            std::mem::take(&mut incoming.entries)
        };
        let slab = std::mem::take(&mut *lock(&self.slab));
        arrived
            .into_iter()
            .chain(slab.entries.into_iter().flatten())
            .filter_map(|entry| entry.abandon())
            .collect()
    }
}
