//! [`Completions`]: completion-driven waits, for C libraries that report what finished.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicU8, Ordering::SeqCst};
use std::sync::Arc;
use std::task::Waker;

use crate::core::CloseHook;
use crate::sync::{lock, Mutex, MutexGuard};

/// What the table holds for one key.
pub(crate) enum KeyState<V> {
    /// A wait is pending on the key.
    Waiting(Waker),
    /// Completed while a wait was pending on the key, which was woken and has not taken the
    /// value yet: the key is still that wait's, and a second wait on it gets `KeyInUse`.
    Claimed(V),
    /// Completed with no wait pending; kept until a wait (or [`Completions::take`]) claims it.
    Done(V),
    /// The wait on the key gave up with a cancel hook ([`WaitKey::on_cancel`]): a value
    /// completed before the hook ran is dropped, not kept, and noted (`answered`): the work it
    /// stands for finished, and the hook has nothing left to cancel. The hook's run on the
    /// loop's thread removes the mark.
    ///
    /// [`WaitKey::on_cancel`]: crate::WaitKey::on_cancel
    Abandoned { answered: bool },
}

/// What a wait with a cancel hook found as it gave up ([`Table::abandon`]).
pub(crate) enum GaveUp<V> {
    /// Nothing for the hook to do: the close ran (or runs) it, or the wait never had the key
    /// and a value completed before it is there for the next wait — the work finished.
    NotMine,
    /// The wait never had the key, which another wait has: the hook runs, and leaves the key
    /// alone (as the close runs it).
    Others,
    /// The key had completed: nothing to cancel. Its value, taken out for nobody.
    Completed(V),
    /// The key is marked abandoned until the hook ran; the waker the wait had left there.
    Marked(Option<Waker>),
}

/// What a wait with a cancel hook has to do with its key, changed only under the table's lock:
/// what its hook may do with the key when it runs. Several waits (of several pumps) may take
/// a key in turn, and a hook that runs late (at its pump's close) must not touch a key its wait
/// has let go of and another wait has since taken.
pub(crate) struct Claim(AtomicU8);

impl Default for Claim {
    fn default() -> Self {
        Claim(AtomicU8::new(Claim::NEW))
    }
}

impl Claim {
    /// The wait has not had the key.
    const NEW: u8 = 0;
    /// The wait is pending on the key: a `Waiting` or `Claimed` there is its.
    const WAITING: u8 = 1;
    /// The key's abandoned mark is the wait's.
    const MARKED: u8 = 2;
    /// The wait took its value.
    const TOOK: u8 = 3;
    /// The wait let go of the key: its hook (if it still runs) leaves the key alone.
    const LET_GO: u8 = 4;

    fn get(&self) -> u8 {
        self.0.load(SeqCst)
    }

    fn set(&self, to: u8) {
        self.0.store(to, SeqCst);
    }

    /// The wait's waker is in the table, on the key (under the table's lock).
    pub(crate) fn waiting(&self) {
        self.set(Claim::WAITING);
    }

    /// The wait took its value (under the table's lock).
    pub(crate) fn took(&self) {
        self.set(Claim::TOOK);
    }

    /// Whether the wait's hook has the key, or had it and let it go: a close ran (or runs) the
    /// hook of the wait while it was pending. Asked under the table's lock.
    pub(crate) fn hook_took_it(&self) -> bool {
        matches!(self.get(), Claim::MARKED | Claim::LET_GO)
    }
}

/// What a cancel hook found as it was about to run ([`Table::take_for_cancel`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ForCancel {
    /// The key completed for its wait, which takes (or took) the value: nothing to cancel.
    Nothing,
    /// The key is marked abandoned for the hook: cancel, then [`Table::unmark`].
    Marked,
    /// The key is not the wait's (it let go of it, or another wait has it): cancel, and leave
    /// the key alone.
    Unmarked,
}

pub(crate) struct Table<K, V> {
    keys: Mutex<HashMap<K, KeyState<V>>>,
}

impl<K, V> Table<K, V> {
    pub(crate) fn keys(&self) -> MutexGuard<'_, HashMap<K, KeyState<V>>> {
        // No user code runs under this lock but the key's own `Hash`, `Eq` and `Clone` (and the
        // drop of a key it replaces): wakers are woken, and values dropped, after it.
        lock(&self.keys)
    }
}

impl<K: Eq + Hash + Clone, V> Table<K, V> {
    /// The wait on `key` gave up with a cancel hook. `owner`: the wait was pending on the key,
    /// which is then its own; a wait that never got that far marks only a key that is nobody's
    /// — one completed before it stays for the next wait, and one another wait has is left to
    /// it — and one whose hook a close ran (or runs) nothing: the hook lets the key go. What it
    /// finds is handed out, to be dropped by the caller outside the lock — unless `held_back`
    /// (the key's `start` still runs, so a value completed for it is not the wait's yet): then
    /// the value is dropped here, after the lock, and the key is marked as answered after its
    /// wait gave up.
    pub(crate) fn abandon(
        &self,
        key: &K,
        owner: bool,
        claim: &Claim,
        held_back: bool,
    ) -> GaveUp<V> {
        let mut keys = self.keys();
        if claim.hook_took_it() {
            return GaveUp::NotMine;
        }
        if !owner {
            match keys.get(key) {
                None => {}
                Some(KeyState::Done(_)) => return GaveUp::NotMine,
                // The hook, when it runs, leaves the key alone whatever became of it by then.
                Some(_) => {
                    claim.set(Claim::LET_GO);
                    return GaveUp::Others;
                }
            }
        }
        let previous = keys.insert(key.clone(), KeyState::Abandoned { answered: false });
        claim.set(Claim::MARKED);
        match previous {
            // Completed inside a `start` that still runs: not the wait's; answered as a key
            // completed after its wait gave up is (`complete_as`), so the hook cancels nothing.
            Some(KeyState::Done(value) | KeyState::Claimed(value)) if held_back => {
                keys.insert(key.clone(), KeyState::Abandoned { answered: true });
                drop(keys);
                crate::unwind::drop_caught(value);
                GaveUp::Marked(None)
            }
            Some(KeyState::Done(value) | KeyState::Claimed(value)) => {
                keys.remove(key);
                claim.set(Claim::TOOK);
                GaveUp::Completed(value)
            }
            Some(KeyState::Waiting(waker)) => GaveUp::Marked(Some(waker)),
            Some(KeyState::Abandoned { .. }) | None => GaveUp::Marked(None),
        }
    }

    /// The cancel hook of `key` is about to run: says whether there is anything to cancel, and
    /// whether the key is the hook's; if it is, marks it abandoned, so no wait can take a value
    /// for it from now on. One step under the lock, so a wait and the hook never both have the
    /// key, and a hook never takes a key its wait let go of (another wait's by now).
    pub(crate) fn take_for_cancel(&self, key: &K, claim: &Claim) -> ForCancel {
        let mut keys = self.keys();
        let mine = match claim.get() {
            Claim::TOOK => return ForCancel::Nothing,
            Claim::LET_GO => return ForCancel::Unmarked,
            // Answered after its wait gave up (from another thread, or by a run before the
            // hook's turn came): the work finished, nothing is left to cancel.
            Claim::MARKED => {
                return match keys.get(key) {
                    Some(KeyState::Abandoned { answered: true }) => ForCancel::Nothing,
                    _ => ForCancel::Marked,
                }
            }
            Claim::WAITING => true,
            _ => false,
        };
        let waiting = match keys.get(key) {
            // Its wait's value (or, for a wait that never waited, one nobody took: its work
            // finished).
            Some(KeyState::Done(_)) => return ForCancel::Nothing,
            Some(KeyState::Claimed(_)) if mine => return ForCancel::Nothing,
            // Another wait's.
            Some(_) if !mine => return ForCancel::Unmarked,
            _ => keys.insert(key.clone(), KeyState::Abandoned { answered: false }),
        };
        claim.set(Claim::MARKED);
        drop(keys);
        if let Some(KeyState::Waiting(waker)) = waiting {
            waker.wake();
        }
        ForCancel::Marked
    }

    /// The wait pending on `key` gave up without a cancel hook: takes its waker out, and leaves
    /// a value completed for it to the next wait or [`Completions::take`] — or, if `take`
    /// (the wait timed out: a value that came wins over the deadline), returns it.
    pub(crate) fn leave(&self, key: &K, take: bool) -> Option<V> {
        let mut keys = self.keys();
        match keys.remove(key) {
            Some(KeyState::Claimed(value)) if take => return Some(value),
            Some(KeyState::Claimed(value)) => {
                keys.insert(key.clone(), KeyState::Done(value));
            }
            Some(KeyState::Waiting(waker)) => {
                drop(keys);
                drop(waker);
            }
            Some(other) => {
                keys.insert(key.clone(), other);
            }
            None => {}
        }
        None
    }

    /// Wakes the wait pending on `key`, if any, to look again.
    pub(crate) fn wake(&self, key: &K) {
        let waker = match self.keys().get(key) {
            Some(KeyState::Waiting(waker)) => waker.clone(),
            _ => return,
        };
        waker.wake();
    }

    /// The cancel hook of `key` ran (or will never run): no late value is expected. Takes the
    /// abandoned mark away only if it is this hook's wait's, which has then let go of the key.
    pub(crate) fn unmark(&self, key: &K, claim: &Claim) {
        let mut keys = self.keys();
        if claim.get() != Claim::MARKED {
            return;
        }
        if matches!(keys.get(key), Some(KeyState::Abandoned { .. })) {
            keys.remove(key);
        }
        claim.set(Claim::LET_GO);
    }
}

impl<K: Send, V: Send> CloseHook for Table<K, V> {
    /// Wakes every pending wait; each looks at its own pump and ends if that one closed.
    fn closed(&self) {
        let wakers: Vec<Waker> = self
            .keys()
            .values()
            .filter_map(|state| match state {
                KeyState::Waiting(waker) => Some(waker.clone()),
                KeyState::Claimed(_) | KeyState::Done(_) | KeyState::Abandoned { .. } => None,
            })
            .collect();
        for waker in wakers {
            waker.wake();
        }
    }
}

/// A table of results keyed by the C library's own ids, for loops that report what finished.
///
/// Many C libraries say which of their objects completed in a run: `curl_multi_info_read`,
/// libusb transfer callbacks, c-ares query callbacks. Calling [`complete`](Completions::complete)
/// from `run_once` for each of them wakes exactly the wait on that key ([`Pump::wait_key`]) —
/// O(finished) work per round and no per-wait check at all, which is how one pump serves a million
/// waits.
///
/// A result completed before anybody waits for its key is kept until a wait (or
/// [`take`](Completions::take)) claims it, so nothing is lost to a race between submitting work
/// and starting to wait. One wait at a time per key. Cloning gives another handle on the same
/// table.
///
/// [`Pump::wait_key`]: crate::Pump::wait_key
///
/// # Examples
///
/// ```
/// use ffi_pump::{Completions, Pump};
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
///
/// # futures_lite::future::block_on(async {
/// // Stand-in for a C library: what each run finished, as (id, status) pairs.
/// let finished = Arc::new(Mutex::new(vec![(7_u32, 200_u16), (8, 404)]));
///
/// let table = Completions::<u32, u16>::new();
/// let reporter = table.clone();
/// let pump = Pump::new(move || {
///     // ffi::run_event_loop_once(); then report what it finished:
///     for (id, status) in finished.lock().unwrap().drain(..) {
///         reporter.complete(id, status);
///     }
/// });
/// pump.spawn();
///
/// let status = pump.wait_key(&table, 8).timeout(Duration::from_secs(2)).await?;
/// assert_eq!(status, 404);
/// assert_eq!(table.take(&7), Some(200)); // completed, never waited for: kept
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
pub struct Completions<K, V> {
    pub(crate) table: Arc<Table<K, V>>,
}

impl<K, V> Clone for Completions<K, V> {
    fn clone(&self) -> Self {
        Completions {
            table: self.table.clone(),
        }
    }
}

impl<K, V> Default for Completions<K, V> {
    fn default() -> Self {
        Completions {
            table: Arc::new(Table {
                keys: Mutex::new(HashMap::new()),
            }),
        }
    }
}

impl<K, V> fmt::Debug for Completions<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = self.table.keys();
        let count = |pick: fn(&KeyState<V>) -> bool| keys.values().filter(|s| pick(s)).count();
        f.debug_struct("Completions")
            .field(
                "waiting",
                &count(|s| matches!(s, KeyState::Waiting(_) | KeyState::Claimed(_))),
            )
            .field("unclaimed", &count(|s| matches!(s, KeyState::Done(_))))
            .field(
                "abandoned",
                &count(|s| matches!(s, KeyState::Abandoned { .. })),
            )
            .finish()
    }
}

impl<K: Eq + Hash, V> Completions<K, V> {
    /// An empty table.
    ///
    /// # Examples
    ///
    /// ```
    /// let table = ffi_pump::Completions::<u64, i32>::new();
    /// assert_eq!(table.unclaimed(), 0);
    /// ```
    pub fn new() -> Self {
        Completions::default()
    }

    /// Records that `key` finished with `value`, and wakes the wait on `key` if there is one.
    ///
    /// Call it from `run_once` (it never blocks on anything but a short internal lock, held while
    /// keys are hashed, compared and cloned: a key type whose `Hash`, `Eq` or `Clone` is slow
    /// holds up the table's other calls that long). Without a
    /// wait, the value is kept until one claims it; a value completed twice before it is claimed
    /// replaces the first, which is returned. If the wait on `key` gave up with a cancel hook
    /// ([`WaitKey::on_cancel`](crate::WaitKey::on_cancel)) that has not run yet, the value is
    /// dropped: nobody will claim it.
    ///
    /// # Examples
    ///
    /// ```
    /// let table = ffi_pump::Completions::new();
    /// assert_eq!(table.complete("job", 1), None);
    /// assert_eq!(table.complete("job", 2), Some(1)); // the unclaimed 1 is replaced
    /// assert_eq!(table.take(&"job"), Some(2));
    /// ```
    pub fn complete(&self, key: K, value: V) -> Option<V> {
        self.complete_as(key, value, true)
    }

    /// [`complete`](Completions::complete), but a value already completed and not yet claimed
    /// stays, and `value` is handed back instead: for a key answered once only (a request,
    /// whose first answer — its `start`'s panic — a later one must not replace).
    pub(crate) fn complete_first(&self, key: K, value: V) -> Option<V> {
        self.complete_as(key, value, false)
    }

    /// Completes `key`; `replace`: a value already there and unclaimed gives way (handed back),
    /// else `value` does.
    fn complete_as(&self, key: K, value: V, replace: bool) -> Option<V> {
        let mut keys = self.table.keys();
        let previous = match keys.entry(key) {
            Entry::Occupied(mut state) if matches!(state.get(), KeyState::Abandoned { .. }) => {
                // Its wait gave up and nobody will claim it: dropped, outside the lock. The mark
                // stays until the wait's cancel hook ran: no other wait takes the key before,
                // and the hook, told the work finished, cancels nothing.
                state.insert(KeyState::Abandoned { answered: true });
                drop(keys);
                // Its panic stays here: this may be `run_once`, which it would end.
                crate::unwind::drop_caught(value);
                return None;
            }
            Entry::Occupied(state)
                if !replace && matches!(state.get(), KeyState::Done(_) | KeyState::Claimed(_)) =>
            {
                return Some(value);
            }
            Entry::Occupied(mut state) => {
                // A wait pending on the key keeps it until it takes the value.
                let claimed = matches!(state.get(), KeyState::Waiting(_) | KeyState::Claimed(_));
                Some(state.insert(match claimed {
                    true => KeyState::Claimed(value),
                    false => KeyState::Done(value),
                }))
            }
            Entry::Vacant(state) => {
                state.insert(KeyState::Done(value));
                None
            }
        };
        drop(keys);
        match previous {
            Some(KeyState::Waiting(waker)) => {
                waker.wake();
                None
            }
            Some(KeyState::Done(unclaimed) | KeyState::Claimed(unclaimed)) => Some(unclaimed),
            Some(KeyState::Abandoned { .. }) | None => None,
        }
    }

    /// Takes the result of `key` if it has completed and no wait claimed it; never waits.
    ///
    /// # Examples
    ///
    /// ```
    /// let table = ffi_pump::Completions::new();
    /// table.complete(3_u8, "done");
    /// assert_eq!(table.take(&3), Some("done"));
    /// assert_eq!(table.take(&3), None);
    /// ```
    pub fn take(&self, key: &K) -> Option<V> {
        let mut keys = self.table.keys();
        match keys.get(key) {
            Some(KeyState::Done(_)) => match keys.remove(key) {
                Some(KeyState::Done(value)) => Some(value),
                _ => None,
            },
            _ => None,
        }
    }

    /// How many completed results wait to be claimed.
    ///
    /// # Examples
    ///
    /// ```
    /// let table = ffi_pump::Completions::new();
    /// table.complete(1_u32, ());
    /// assert_eq!(table.unclaimed(), 1);
    /// ```
    pub fn unclaimed(&self) -> usize {
        self.table
            .keys()
            .values()
            .filter(|s| matches!(s, KeyState::Done(_)))
            .count()
    }
}
