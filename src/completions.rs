//! [`Completions`]: completion-driven waits, for C libraries that report what finished.

use std::collections::hash_map::{Entry, HashMap};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::reactor::Timer;

use crate::shared::{CloseHook, Shared};
use crate::sync::{lock, Mutex, MutexGuard};
use crate::Error;

enum Slot<V> {
    /// A wait is pending on the key.
    Waiting(Waker),
    /// Completed; kept until a wait (or [`Completions::take`]) claims it.
    Done(V),
}

struct Slots<K, V> {
    map: HashMap<K, Slot<V>>,
    /// The pumps whose close this table hears of (by [`Shared::id`]).
    pumps: Vec<usize>,
}

struct Table<K, V> {
    slots: Mutex<Slots<K, V>>,
}

impl<K, V> Table<K, V> {
    fn slots(&self) -> MutexGuard<'_, Slots<K, V>> {
        // No user code runs under this lock: wakers are woken, and values dropped, after it.
        lock(&self.slots)
    }
}

impl<K: Send, V: Send> CloseHook for Table<K, V> {
    /// Wakes every pending wait; each looks at its own pump and ends if that one closed.
    fn closed(&self) {
        let wakers: Vec<Waker> = self
            .slots()
            .map
            .values()
            .filter_map(|slot| match slot {
                Slot::Waiting(waker) => Some(waker.clone()),
                Slot::Done(_) => None,
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
    table: Arc<Table<K, V>>,
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
                slots: Mutex::new(Slots {
                    map: HashMap::new(),
                    pumps: Vec::new(),
                }),
            }),
        }
    }
}

impl<K, V> fmt::Debug for Completions<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slots = self.table.slots();
        let waiting = slots
            .map
            .values()
            .filter(|s| matches!(s, Slot::Waiting(_)))
            .count();
        f.debug_struct("Completions")
            .field("waiting", &waiting)
            .field("unclaimed", &(slots.map.len() - waiting))
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
    /// Call it from `run_once` (it never blocks on anything but a short internal lock). Without a
    /// wait, the value is kept until one claims it; a value completed twice before it is claimed
    /// replaces the first, which is returned.
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
        let previous = {
            let mut slots = self.table.slots();
            slots.map.insert(key, Slot::Done(value))
        };
        match previous {
            Some(Slot::Waiting(waker)) => {
                waker.wake();
                None
            }
            Some(Slot::Done(unclaimed)) => Some(unclaimed),
            None => None,
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
        let mut slots = self.table.slots();
        match slots.map.get(key) {
            Some(Slot::Done(_)) => match slots.map.remove(key) {
                Some(Slot::Done(value)) => Some(value),
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
        let slots = self.table.slots();
        slots
            .map
            .values()
            .filter(|s| matches!(s, Slot::Done(_)))
            .count()
    }
}

/// Future returned by [`Pump::wait_key`](crate::Pump::wait_key): resolves to the value that
/// `run_once` completed the key with.
///
/// # Cancel safety
///
/// Dropping the future removes it from the table and from the pump's pending count. A value
/// completed meanwhile is not lost: it stays in the table for the next wait on the key or for
/// [`Completions::take`].
///
/// # Examples
///
/// ```
/// use ffi_pump::{Completions, Error, Pump};
/// use std::time::Duration;
///
/// # futures_lite::future::block_on(async {
/// let table = Completions::<u32, ()>::new();
/// let pump = Pump::new(|| {});
/// pump.spawn();
/// let never = pump.wait_key(&table, 1).timeout(Duration::from_millis(20)).await;
/// assert_eq!(never, Err(Error::TimedOut));
/// # });
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct WaitKey<K: Eq + Hash, V> {
    shared: Arc<Shared>,
    table: Arc<Table<K, V>>,
    key: K,
    phase: Phase,
    timer: Option<Timer>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    New,
    Waiting,
    Done,
}

impl<K: Eq + Hash, V> Unpin for WaitKey<K, V> {}

impl<K: Eq + Hash, V> WaitKey<K, V> {
    pub(crate) fn new(shared: Arc<Shared>, table: &Completions<K, V>, key: K) -> Self {
        WaitKey {
            shared,
            table: table.table.clone(),
            key,
            phase: Phase::New,
            timer: None,
        }
    }

    /// Gives up with [`Error::TimedOut`] after `timeout`, counted from this call. A value already
    /// completed wins over a zero timeout; `Duration::MAX` never times out.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Completions, Pump};
    /// use std::time::Duration;
    ///
    /// # futures_lite::future::block_on(async {
    /// let table = Completions::new();
    /// table.complete(5_u16, "ready");
    /// let pump = Pump::new(|| {});
    /// pump.spawn();
    /// let value = pump.wait_key(&table, 5).timeout(Duration::ZERO).await?;
    /// assert_eq!(value, "ready");
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn timeout(self, timeout: Duration) -> Self {
        let deadline = Instant::now().checked_add(timeout);
        self.at(deadline)
    }

    /// Gives up with [`Error::TimedOut`] at `deadline`.
    pub fn deadline(self, deadline: Instant) -> Self {
        self.at(Some(deadline))
    }

    fn at(mut self, deadline: Option<Instant>) -> Self {
        self.timer = Some(deadline.map_or_else(Timer::never, Timer::at));
        self
    }
}

impl<K, V> WaitKey<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Send + 'static,
{
    /// Makes sure the table hears of this pump's close, outside the table's lock (the hook may
    /// run at once).
    fn hear_close(&self) {
        let id = self.shared.id();
        let first = {
            let mut slots = self.table.slots();
            let first = !slots.pumps.contains(&id);
            if first {
                slots.pumps.push(id);
            }
            first
        };
        if first {
            let table: Arc<dyn CloseHook> = self.table.clone();
            let hook: Weak<dyn CloseHook> = Arc::downgrade(&table);
            self.shared.on_close(hook);
        }
    }

    fn poll_key(&mut self, waker: &Waker) -> Poll<Result<V, Error>> {
        if self.phase == Phase::New {
            self.shared.admit_wait()?;
            self.hear_close();
        }
        let mut slots = self.table.slots();
        match slots.map.entry(self.key.clone()) {
            Entry::Occupied(slot) if matches!(slot.get(), Slot::Done(_)) => {
                let Slot::Done(value) = slot.remove() else {
                    unreachable!("matched Done")
                };
                drop(slots);
                self.finish();
                return Poll::Ready(Ok(value));
            }
            Entry::Occupied(_) if self.phase == Phase::New => {
                return Poll::Ready(Err(Error::KeyInUse));
            }
            Entry::Occupied(mut slot) => {
                if let Err(err) = self.shared.status() {
                    slot.remove();
                    drop(slots);
                    self.finish();
                    return Poll::Ready(Err(err));
                }
                if let Slot::Waiting(old) = slot.get_mut() {
                    if !old.will_wake(waker) {
                        *old = waker.clone();
                    }
                }
            }
            Entry::Vacant(slot) => {
                // Under the table lock, so a close after this look wakes the waker inserted here.
                if let Err(err) = self.shared.status() {
                    drop(slots);
                    self.finish();
                    return Poll::Ready(Err(err));
                }
                slot.insert(Slot::Waiting(waker.clone()));
                if self.phase == Phase::New {
                    self.shared.add_pending();
                    self.phase = Phase::Waiting;
                }
            }
        }
        Poll::Pending
    }

    fn finish(&mut self) {
        if self.phase == Phase::Waiting {
            self.shared.remove_pending();
        }
        self.phase = Phase::Done;
    }
}

impl<K: Eq + Hash, V> WaitKey<K, V> {
    /// Gives up: takes this wait's entry out of the table (a completed value stays there).
    fn cancel(&mut self) {
        if self.phase == Phase::Waiting {
            let mut slots = self.table.slots();
            if matches!(slots.map.get(&self.key), Some(Slot::Waiting(_))) {
                slots.map.remove(&self.key);
            }
            drop(slots);
            self.shared.remove_pending();
        }
        self.phase = Phase::Done;
    }
}

impl<K, V> Future for WaitKey<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Send + 'static,
{
    type Output = Result<V, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        assert!(
            this.phase != Phase::Done,
            "a wait future was polled after it completed"
        );
        if let Poll::Ready(outcome) = this.poll_key(cx.waker()) {
            this.phase = Phase::Done;
            this.timer = None;
            return Poll::Ready(outcome);
        }
        if let Some(timer) = &mut this.timer {
            if Pin::new(timer).poll(cx).is_ready() {
                this.timer = None;
                this.cancel();
                return Poll::Ready(Err(Error::TimedOut));
            }
        }
        Poll::Pending
    }
}

impl<K: Eq + Hash, V> Drop for WaitKey<K, V> {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl<K: Eq + Hash + fmt::Debug, V> fmt::Debug for WaitKey<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitKey")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}
