//! The registry of pump-evaluated waits: type-erased checks that the pump evaluates right after
//! each run, waking only the waits whose check succeeded.
//!
//! Waits register into a short `incoming` list, so registering never waits for an evaluation in
//! progress; the next holder of the loop lock moves them into the slab and evaluates them (see
//! [`Shared::settle`](crate::shared::Shared::settle)). The slab owns the checks, so evaluating one
//! takes no lock of its own: the pass over thousands of entries is plain loads and calls.
//!
//! A wait that gives up marks its entry cancelled, and must then know that no check of it is
//! running or will run (its C object may be freed next). The evaluating thread announces which
//! block of [`BLOCK`] keys it is in ([`Registry::evaluating`]), then reads how many entries are
//! marked ([`Registry::marked`]) and, if any are, each entry's mark before its check; the wait
//! counts and marks itself, then reads the announcement. A fence on each side orders the two, so
//! either the evaluator sees the mark, or the wait sees that its block is being evaluated and
//! waits for the evaluator to leave it ([`Registry::wait_out`]): a few checks. One fence per
//! block of checks instead of a lock per check, and while nobody gives up, the pass touches only
//! the checks themselves. The pump drops a cancelled entry when it next meets it, or when it goes
//! idle. User code other than the checks (the drop of what a check captured) never runs under
//! these locks.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::sync::{fence, lock, spin_step, AtomicBool, AtomicUsize, Mutex, MutexGuard};

/// A registered check, as the evaluating thread sees it.
pub(crate) trait Evaluate: Send {
    /// Runs the check once, unless `look_for_mark` and the wait gave up. `Some` when the entry is
    /// finished (completed, its check panicked, or cancelled): the pump removes it and wakes the
    /// waker.
    ///
    /// Called only under the loop lock, inside an announced block (or before the entry is in
    /// the registry at all), with `look_for_mark` unless no entry was marked when the block was
    /// announced.
    fn evaluate(&mut self, look_for_mark: bool) -> Option<Finished>;

    /// Whether the wait gave up on this entry.
    fn is_cancelled(&self) -> bool;

    /// The waker of a wait that will never complete, because the pump closed.
    fn abandon(&self) -> Option<Waker>;

    /// Tells the wait under which key its entry sits in the slab.
    fn admitted(&self, key: usize);
}

/// An entry that leaves the registry.
pub(crate) struct Finished {
    /// The wait's waker, if it polled and did not give up.
    pub(crate) waker: Option<Waker>,
    /// Whether it was marked cancelled (and counted in [`Registry::marked`]).
    pub(crate) marked: bool,
}

/// The registry's side of a wait: the check, owned by the registry once registered.
pub(crate) type Entry = Box<dyn Evaluate>;

/// Entries evaluated between two looks at the clock.
const CLOCK_STRIDE: usize = 64;

/// Keys per announced block: a cancelling wait may wait for up to this many checks.
const BLOCK: usize = 64;

/// [`Registry::evaluating`]: nothing is being evaluated.
const NO_BLOCK: usize = usize::MAX;

/// [`Registry::evaluating`]: entries at any key may be (the arrivals, wherever they landed).
const ANY_BLOCK: usize = usize::MAX - 1;

/// An entry's key before it is admitted into the slab.
pub(crate) const NOT_ADMITTED: usize = usize::MAX;

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
    ///
    /// Returns whether it removed an entry that was marked cancelled.
    fn evaluate(
        &mut self,
        key: usize,
        look_for_mark: bool,
        woken: &mut Vec<Waker>,
        finished: &mut Vec<Entry>,
    ) -> bool {
        let Some(entry) = &mut self.entries[key] else {
            return false;
        };
        let Some(Finished { waker, marked }) = entry.evaluate(look_for_mark) else {
            return false;
        };
        finished.extend(self.remove(key));
        woken.extend(waker);
        marked
    }

    fn admitted(&self, key: usize) {
        if let Some(entry) = &self.entries[key] {
            entry.admitted(key);
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

pub(crate) struct Registry {
    incoming: Mutex<Incoming>,
    /// Whether `incoming` holds entries nobody has evaluated yet; changed under its lock.
    arrived: AtomicBool,
    slab: Mutex<Slab>,
    /// The block of keys whose checks may be running: `key / BLOCK`, [`ANY_BLOCK`] or
    /// [`NO_BLOCK`]. Written by the holder of the loop lock only.
    evaluating: AtomicUsize,
    /// Entries marked cancelled and not yet removed (at least: a wait counts itself before it
    /// marks its entry).
    marked: AtomicUsize,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            incoming: Mutex::default(),
            arrived: AtomicBool::new(false),
            slab: Mutex::default(),
            evaluating: AtomicUsize::new(NO_BLOCK),
            marked: AtomicUsize::new(0),
        }
    }
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
        let mut slab = lock(&self.slab);
        let key = slab.insert(entry);
        slab.admitted(key);
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
            slab.admitted(key);
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
        let look_for_marks = self.announce(ANY_BLOCK);
        let mut removed = 0;
        for key in keys {
            removed += usize::from(slab.evaluate(key, look_for_marks, woken, finished));
        }
        self.announce(NO_BLOCK);
        self.unmark(removed);
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
        slab.cursor = start;
        let mut look_for_marks = false;
        let mut removed = 0;
        for step in 0..size {
            let key = (start + step) % size;
            if step % CLOCK_STRIDE == CLOCK_STRIDE - 1
                && deadline.is_some_and(|d| Instant::now() >= d)
            {
                slab.cursor = key;
                break;
            }
            if step == 0 || key % BLOCK == 0 {
                look_for_marks = self.announce(key / BLOCK);
            }
            removed += usize::from(slab.evaluate(key, look_for_marks, woken, finished));
        }
        self.announce(NO_BLOCK);
        self.unmark(removed);
    }

    /// Says which block of keys may have checks running from now on; returns whether any entry
    /// is marked cancelled, in which case the checks of the block must look at their marks.
    ///
    /// A wait that saw an earlier announcement marked its entry (and counted it) before its
    /// fence, so after this fence the count and the mark are visible here.
    fn announce(&self, block: usize) -> bool {
        // Release: a wait that sees the next block also sees the checks of this one ended.
        self.evaluating.store(block, Release);
        fence(SeqCst);
        self.marked.load(Relaxed) > 0
    }

    /// Counts a wait about to mark its entry cancelled.
    pub(crate) fn count_mark(&self) {
        self.marked.fetch_add(1, Relaxed);
    }

    /// Uncounts `n` marks: their entries left the slab, or their waits found them finished.
    pub(crate) fn unmark(&self, n: usize) {
        if n > 0 {
            self.marked.fetch_sub(n, Relaxed);
        }
    }

    /// Returns once no check of the entry whose key is in `key` runs or will run, given that
    /// its wait marked it cancelled before (and fenced, see [`fence_cancel`]).
    ///
    /// Waits at most for the evaluator to leave the entry's block. Must not be called by the
    /// evaluating thread (from inside a check), which would wait for itself.
    pub(crate) fn wait_out(&self, key: &AtomicUsize) {
        let mut step = 0;
        loop {
            let block = self.evaluating.load(Acquire);
            let key = key.load(Acquire);
            let running = match block {
                NO_BLOCK => false,
                ANY_BLOCK => true,
                block => key != NOT_ADMITTED && key / BLOCK == block,
            };
            if !running {
                return;
            }
            while self.evaluating.load(Acquire) == block {
                spin_step(&mut step);
            }
        }
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
        self.unmark(cancelled.len());
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

/// The wait's half of the protocol in the module docs: after counting and marking its entry
/// cancelled and before [`Registry::wait_out`].
pub(crate) fn fence_cancel() {
    fence(SeqCst);
}
