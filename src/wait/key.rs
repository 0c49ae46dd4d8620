//! [`WaitKey`]: the completion-driven wait, on a key of a [`Completions`] table.

use std::collections::hash_map::Entry;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::{Pending, Timeout, Wait};
use crate::completions::{KeyState, Table};
use crate::core::{CloseHook, Core};
use crate::{Completions, Error};

enum State {
    /// Not polled yet: not in the table, not pending.
    New,
    /// Its waker is in the table under the key; counted pending.
    Waiting {
        _pending: Pending,
    },
    Done,
}

/// The wait's side of a completion-driven wait: its key in the table.
struct Keyed<K: Eq + Hash, V> {
    core: Arc<Core>,
    table: Arc<Table<K, V>>,
    key: K,
    state: State,
}

impl<K, V> Keyed<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Send + 'static,
{
    /// Makes sure the table hears of this pump's close. Outside the table's lock: the hook may
    /// run at once.
    fn hear_close(&self) {
        let table: Arc<dyn CloseHook> = self.table.clone();
        let hook: Weak<dyn CloseHook> = Arc::downgrade(&table);
        self.core.close.hear(hook);
    }
}

impl<K, V> Wait for Keyed<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Send + 'static,
{
    type Output = V;

    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<V, Error>> {
        let new = matches!(self.state, State::New);
        if new {
            self.core.may_wait()?;
            self.hear_close();
        }
        let mut keys = self.table.keys();
        match keys.entry(self.key.clone()) {
            Entry::Occupied(state) if matches!(state.get(), KeyState::Done(_)) => {
                let KeyState::Done(value) = state.remove() else {
                    unreachable!("matched Done")
                };
                drop(keys);
                self.state = State::Done;
                Poll::Ready(Ok(value))
            }
            Entry::Occupied(_) if new => Poll::Ready(Err(Error::KeyInUse)),
            Entry::Occupied(mut state) => {
                if let Err(why) = self.core.status() {
                    state.remove();
                    drop(keys);
                    self.state = State::Done;
                    return Poll::Ready(Err(why));
                }
                if let KeyState::Waiting(old) = state.get_mut() {
                    if !old.will_wake(cx.waker()) {
                        *old = cx.waker().clone();
                    }
                }
                Poll::Pending
            }
            Entry::Vacant(state) => {
                // Under the table lock, so a close after this look wakes the waker inserted here.
                if let Err(why) = self.core.status() {
                    drop(keys);
                    self.state = State::Done;
                    return Poll::Ready(Err(why));
                }
                state.insert(KeyState::Waiting(cx.waker().clone()));
                if new {
                    self.state = State::Waiting {
                        _pending: Pending::count(&self.core),
                    };
                }
                Poll::Pending
            }
        }
    }

    fn cancel(&mut self) {
        self.leave();
    }
}

impl<K: Eq + Hash, V> Keyed<K, V> {
    /// Gives up: takes this wait's waker out of the table. A completed value stays there for the
    /// next wait on the key, or for [`Completions::take`].
    fn leave(&mut self) {
        if let State::Waiting { .. } = self.state {
            let mut keys = self.table.keys();
            if matches!(keys.get(&self.key), Some(KeyState::Waiting(_))) {
                keys.remove(&self.key);
            }
        }
        self.state = State::Done;
    }
}

// The key is never pinned (only cloned and compared), so the wait may move freely.
impl<K: Eq + Hash, V> Unpin for Keyed<K, V> {}

impl<K: Eq + Hash, V> Drop for Keyed<K, V> {
    fn drop(&mut self) {
        self.leave();
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
/// # Panics
///
/// Panics if polled again after it completed, like most futures.
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
    wait: Timeout<Keyed<K, V>>,
}

impl<K: Eq + Hash, V> WaitKey<K, V> {
    pub(crate) fn new(core: Arc<Core>, table: &Completions<K, V>, key: K) -> Self {
        WaitKey {
            wait: Timeout::new(Keyed {
                core,
                table: table.table.clone(),
                key,
                state: State::New,
            }),
        }
    }

    timeout_methods! {
        "A value already completed wins over a zero timeout.",
        "
/// use ffi_pump::{Completions, Pump};
/// use std::time::Duration;
///
/// # futures_lite::future::block_on(async {
/// let table = Completions::new();
/// table.complete(5_u16, \"ready\");
/// let pump = Pump::new(|| {});
/// pump.spawn();
/// let value = pump.wait_key(&table, 5).timeout(Duration::ZERO).await?;
/// assert_eq!(value, \"ready\");
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
"
    }
}

impl<K, V> Future for WaitKey<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Send + 'static,
{
    type Output = Result<V, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.wait.poll(cx)
    }
}

impl<K: Eq + Hash + fmt::Debug, V> fmt::Debug for WaitKey<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitKey")
            .field("key", &self.wait.wait().key)
            .finish_non_exhaustive()
    }
}
