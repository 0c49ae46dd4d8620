//! [`WaitKey`]: the completion-driven wait, on a key of a [`Completions`] table.

use std::collections::hash_map::Entry;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll, Wake, Waker};

use super::{Pending, Timeout, Wait};
use crate::completions::{Claim, ForCancel, GaveUp, KeyState, Table};
use crate::core::{CloseHook, Core};
use crate::loop_handle::{HeldCleanup, Started};
use crate::{Completions, Error, LoopHandle};

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
struct Keyed<K: Eq + Hash + Clone, V> {
    core: Arc<Core>,
    table: Arc<Table<K, V>>,
    key: K,
    state: State,
    /// [`WaitKey::on_cancel`]: the cleanup held on the loop's thread. Fired when the wait gives
    /// up; dropping it (the wait got its value, or the key was not its) releases it unrun.
    on_cancel: Option<Box<dyn HeldCleanup>>,
    /// With a cancel hook: what the wait has to do with its key (set under the table's lock), so
    /// the hook run by a close at that moment knows whether there is anything to cancel, and
    /// whether the key is still the wait's.
    claim: Option<Arc<Claim>>,
    /// What a claim made before the first poll ([`WaitKey::claim`]) ended with.
    claimed: Option<Result<V, Error>>,
    /// Polled once: asked whether it may wait at all (not from inside its pump, say).
    polled: bool,
    /// [`LoopHandle::submit`]'s `start`, whose panic ends the wait.
    started: Option<Started>,
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
        self.resume_start_panic();
        if let Some(outcome) = self.claimed.take() {
            return Poll::Ready(outcome);
        }
        // Ended already: by the panic it resumed, which its `Timeout` did not see end.
        assert!(
            !matches!(self.state, State::Done),
            "a wait future was polled after it completed"
        );
        // Refused at its first poll (from inside the pump, say), also with its key claimed
        // already: the key goes back, its cancel hook fires.
        if !std::mem::replace(&mut self.polled, true) {
            let refused = match self.state {
                State::New => self.core.may_wait().err(),
                // Claimed already: the look finds its value, or the close, as a later poll
                // would; only a poll from inside the pump that would wait is refused.
                _ if crate::reentry::is_inside(self.core.id()) => match self.look(cx) {
                    Poll::Ready(looked) => return Poll::Ready(looked),
                    Poll::Pending => Some(Error::Reentrant),
                },
                _ => None,
            };
            if let Some(why) = refused {
                crate::unwind::drop_caught(self.leave());
                return Poll::Ready(Err(why));
            }
        }
        let looked = self.look(cx);
        if looked.is_pending() {
            // A panic kept after the first look above woke the waker the table had then,
            // perhaps not this one: look again now that this one is there.
            self.resume_start_panic();
        }
        looked
    }

    fn cancel(&mut self) -> Option<Result<V, Error>> {
        self.resume_start_panic();
        // A value completed inside a `start` that still runs is not the wait's yet: the wait
        // gives up without it, and its cancel hook, which runs after `start`, finds the work
        // finished and cancels nothing.
        // Told first that it gave up: a `start` that had not begun never runs, one that began is
        // seen running until it ended.
        let held_back = (self.started.as_ref())
            .is_some_and(|started| !started.give_up() && started.is_running());
        self.leave_as(held_back, true).map(Ok)
    }

    fn pump_id(&self) -> usize {
        self.core.id()
    }
}

impl<K: Eq + Hash + Clone, V> Keyed<K, V> {
    /// Resumes the panic of [`LoopHandle::submit`]'s `start` here, in the awaiting task, once
    /// the wait gave up (its cancel runs, for what `start` began).
    fn resume_start_panic(&mut self) {
        if let Some(panic) = self.started.as_ref().and_then(Started::take_panic) {
            crate::unwind::drop_caught(self.leave());
            resume_unwind(panic);
        }
    }
}

impl<K, V> Keyed<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Send + 'static,
{
    /// Looks at the key in the table: takes its value, or waits there with `cx`'s waker.
    fn look(&mut self, cx: &mut Context<'_>) -> Poll<Result<V, Error>> {
        let new = matches!(self.state, State::New);
        if new {
            self.hear_close();
        }
        let mut keys = self.table.keys();
        // Its pump's close ran its cancel hook: the key is not the wait's any more, nor any
        // value completed for it since.
        if self
            .claim
            .as_ref()
            .is_some_and(|claim| claim.hook_took_it())
        {
            drop(keys);
            crate::unwind::drop_caught(self.leave());
            return Poll::Ready(Err(self.core.status().err().unwrap_or(Error::Closed)));
        }
        match keys.entry(self.key.clone()) {
            // Its own value, or (for a new wait) one completed before anybody waited.
            Entry::Occupied(state)
                if (matches!(state.get(), KeyState::Claimed(_)) && !new)
                    || matches!(state.get(), KeyState::Done(_)) =>
            {
                // Answered before `start` began (the key completed elsewhere): it never runs,
                // as for a value the table held before the submit. Told first: one that began
                // instead is seen running below (it counts as running from before it begins).
                if let Some(started) = &self.started {
                    let _ = started.give_up();
                }
                // Completed inside a `start` that still runs, or that panicked after: the value
                // waits for its end, and a panic goes first.
                if (self.started.as_ref()).is_some_and(|started| started.holds_back(cx.waker())) {
                    return Poll::Pending;
                }
                let (KeyState::Claimed(value) | KeyState::Done(value)) = state.remove() else {
                    unreachable!("matched a value")
                };
                if let Some(claim) = &self.claim {
                    claim.took();
                }
                drop(keys);
                self.on_cancel = None;
                self.state = State::Done;
                Poll::Ready(Ok(value))
            }
            // Another wait's (pending, or woken with its value), or abandoned by one whose
            // cancel hook has not run yet: neither the key nor its cancel hook is this wait's.
            Entry::Occupied(_) if new => {
                drop(keys);
                self.on_cancel = None;
                self.state = State::Done;
                Poll::Ready(Err(Error::KeyInUse))
            }
            Entry::Occupied(mut state) => {
                if let Err(why) = self.core.status() {
                    drop(keys);
                    crate::unwind::drop_caught(self.leave());
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
                    crate::unwind::drop_caught(self.leave());
                    return Poll::Ready(Err(why));
                }
                state.insert(KeyState::Waiting(cx.waker().clone()));
                if let Some(claim) = &self.claim {
                    claim.waiting();
                }
                if new {
                    self.state = State::Waiting {
                        _pending: Pending::count(&self.core),
                    };
                }
                Poll::Pending
            }
        }
    }
}

impl<K: Eq + Hash + Clone, V> Keyed<K, V> {
    /// Gives up (timed out, dropped, or the pump closed): takes this wait's waker out of the
    /// table. Without a cancel hook a completed value stays there for the next wait on the key,
    /// or for [`Completions::take`]; with one, the key is marked abandoned (a value completed
    /// before the hook runs is dropped) and the hook goes to the loop's thread — or, if that
    /// thread took it already as it stopped, the mark goes again at once. Returns the value of a
    /// key that completed before the wait gave up (the work finished: no hook runs), which a
    /// timeout hands over and a drop drops.
    fn leave(&mut self) -> Option<V> {
        self.leave_as(false, false)
    }

    /// [`leave`](Keyed::leave); `held_back`: a value completed for the key is not the wait's
    /// (its `start` still runs): dropped, not returned, and the cancel hook goes as for a key
    /// still pending. `timed_out`: a value completed for the wait is returned also without a
    /// cancel hook — it wins over the deadline.
    fn leave_as(&mut self, held_back: bool, timed_out: bool) -> Option<V> {
        let waiting = matches!(self.state, State::Waiting { .. });
        self.state = State::Done;
        if let Some(mut hook) = self.on_cancel.take() {
            // A `start` still queued is dropped unrun: its hook then has nothing to undo.
            if let Some(started) = &self.started {
                let _ = started.give_up();
            }
            let claim = self
                .claim
                .as_ref()
                .expect("a wait with a hook has its claim");
            match self.table.abandon(&self.key, waiting, claim, held_back) {
                GaveUp::Marked(waker) => {
                    // Taken by the close already: it runs (or ran) without the key.
                    if !hook.fire() {
                        self.table.unmark(&self.key, claim);
                    }
                    drop(waker);
                }
                // The work finished, or is another wait's: the hook goes unrun.
                GaveUp::Completed(value) => {
                    drop(hook);
                    return Some(value);
                }
                // Its own work, which the hook undoes, and another wait's key, which it leaves.
                GaveUp::Others => {
                    let _ = hook.fire();
                }
                GaveUp::NotMine => {}
            }
            drop(hook);
            return None;
        }
        match waiting {
            true => self.table.leave(&self.key, timed_out),
            false => None,
        }
    }
}

/// The waker of a key claimed before the wait's first poll, which brings the real one.
struct Unpolled;

impl Wake for Unpolled {
    fn wake(self: Arc<Self>) {}
}

// The key is never pinned (only cloned and compared), so the wait may move freely.
impl<K: Eq + Hash + Clone, V> Unpin for Keyed<K, V> {}

impl<K: Eq + Hash + Clone, V> Drop for Keyed<K, V> {
    fn drop(&mut self) {
        // Nobody takes a value completed meanwhile; what it holds may panic as it goes.
        crate::unwind::drop_caught(self.claimed.take());
        crate::unwind::drop_caught(self.leave());
    }
}

/// Future returned by [`Pump::wait_key`](crate::Pump::wait_key): resolves to the value that
/// `run_once` completed the key with.
///
/// # Cancel safety
///
/// Dropping the future removes it from the table and from the pump's pending count. A value
/// completed meanwhile is not lost: it stays in the table for the next wait on the key or for
/// [`Completions::take`] — unless the wait has a cancel hook ([`WaitKey::on_cancel`]), whose
/// work finished then: the value is dropped with the wait.
///
/// # Panics
///
/// Panics if polled again after it completed, like most futures. A wait made by
/// [`LoopHandle::submit`] resumes the panic of its `start`.
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
pub struct WaitKey<K: Eq + Hash + Clone, V> {
    wait: Timeout<Keyed<K, V>>,
}

impl<K: Eq + Hash + Clone, V> WaitKey<K, V> {
    pub(crate) fn new(core: Arc<Core>, table: &Completions<K, V>, key: K) -> Self {
        WaitKey {
            wait: Timeout::new(Keyed {
                core,
                table: table.table.clone(),
                key,
                state: State::New,
                on_cancel: None,
                claim: None,
                claimed: None,
                polled: false,
                started: None,
            }),
        }
    }

    /// Takes the key now, as the first poll would (its waker comes with that poll): whether it
    /// is this wait's. If not — another wait's, holding a value already, or the pump closed —
    /// the wait has ended, and its first poll says how. Whether it may wait at all (not from
    /// inside its pump) is asked at that first poll, wherever it is made.
    pub(crate) fn claim(&mut self) -> bool
    where
        K: Send + 'static,
        V: Send + 'static,
    {
        static UNPOLLED: OnceLock<Waker> = OnceLock::new();
        let unpolled = UNPOLLED.get_or_init(|| Waker::from(Arc::new(Unpolled)));
        let keyed = self.wait.wait_mut();
        // On a closed pump nothing is claimed, not even a value the table holds (as a wait
        // there ends with the close and leaves the value): `start` is dropped unrun.
        if let Err(why) = keyed.core.status() {
            keyed.on_cancel = None;
            keyed.state = State::Done;
            keyed.claimed = Some(Err(why));
            return false;
        }
        match keyed.look(&mut Context::from_waker(unpolled)) {
            Poll::Pending => true,
            Poll::Ready(outcome) => {
                keyed.claimed = Some(outcome);
                false
            }
        }
    }

    /// Ends the wait with the panic of `started`'s `start`, if it panics.
    pub(crate) fn started_by(mut self, started: Started) -> Self {
        self.wait.wait_mut().started = Some(started);
        self
    }

    timeout_methods! {
        "A value already completed wins over a zero timeout (on a driven pump: see `Error::NotRunning`).",
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

impl<K, V> WaitKey<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Send + 'static,
{
    /// Cleans up in C when this wait gives up: if it times out, is dropped, or its pump closes
    /// before its key completed, `cancel` runs on the loop's thread with the state, exactly
    /// once, to remove the C object the key stood for (a transfer, a timer). A value completed
    /// for the key and not yet taken when the wait gave up (the work finished: `cancel` does not
    /// run) is the answer of a wait that timed out — it wins over the deadline — and dropped
    /// with a wait that was dropped; one completed after and before `cancel`'s turn came on the
    /// loop's thread (from another thread, or by a run) is dropped instead of kept for a wait
    /// that will never come, and `cancel` does not run then either: the work finished.
    ///
    /// When the pump closes, the cancels of the waits it ends run on the loop's thread before
    /// the state is dropped, after the last run; if the state was never made (the factory
    /// panicked), they are dropped unrun. A panic in `cancel` is caught there and goes no
    /// further, like one in [`LoopHandle::post`]: the key is free again either way.
    ///
    /// Not run when the wait gets its value, nor when it fails with [`Error::KeyInUse`] (the key
    /// is another wait's), nor when given to a wait that has ended already: `cancel` is then
    /// dropped unrun. A wait that gives up before it had its key claims nothing: a value
    /// completed before it stays in the table (and `cancel` does not run: the work finished);
    /// a key another wait has is left to that wait, and `cancel` runs. Until the hook has run,
    /// a new wait on the key gets `KeyInUse` — but for a hook that the pump's close holds: a
    /// wait that ends with the close lets go of its key at once, and its hook, run by the
    /// close, leaves the key alone.
    ///
    /// If the pump is closed already, `cancel` is dropped unrun (the work it would undo was
    /// never started: [`LoopHandle::submit`] drops `start` then too).
    ///
    /// Other pumps may wait on keys of the same table: a hook only ever takes its own wait's
    /// key, so one that runs at the close after its wait let go of the key (another pump's wait
    /// may have it by then) still cancels, and leaves the key alone.
    ///
    /// # Panics
    ///
    /// Panics if `handle` is not the loop of the pump this wait waits on: that loop's close would
    /// run `cancel` while the wait goes on.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Completions, Error, Pump};
    /// use std::collections::HashSet;
    /// use std::time::Duration;
    ///
    /// # futures_lite::future::block_on(async {
    /// // Stand-in for a thread-affine C library: the ids of its running transfers.
    /// let done = Completions::<u32, ()>::new();
    /// let (pump, transfers) =
    ///     Pump::builder().build_with_state(|_| Ok(HashSet::<u32>::new()), |_, _| None)?;
    /// transfers.call(|running| running.insert(1)).await?; // start transfer 1
    /// let outcome = pump
    ///     .wait_key(&done, 1)
    ///     .on_cancel(&transfers, |running| {
    ///         running.remove(&1); // ffi::transfer_cancel(1)
    ///     })
    ///     .timeout(Duration::from_millis(20))
    ///     .await;
    /// assert_eq!(outcome, Err(Error::TimedOut));
    /// assert!(transfers.call(|running| running.is_empty()).await?); // cancelled in C
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn on_cancel<S: 'static>(
        mut self,
        handle: &LoopHandle<S>,
        cancel: impl FnOnce(&mut S) + Send + 'static,
    ) -> Self {
        let keyed = self.wait.wait_mut();
        assert!(
            handle.pump_id() == keyed.core.id(),
            "`on_cancel` was given the `LoopHandle` of another pump than the one the wait waits on"
        );
        // Ended already (its value, `KeyInUse`, its pump's close): it gives nothing up.
        if matches!(keyed.state, State::Done) {
            crate::unwind::drop_caught(cancel);
            return self;
        }
        let (table, key) = (keyed.table.clone(), keyed.key.clone());
        let claim = Arc::new(Claim::default());
        // Polled already: it is pending on the key (its hook comes late, but takes its key).
        if matches!(keyed.state, State::Waiting { .. }) {
            claim.waiting();
        }
        keyed.claim = Some(claim.clone());
        keyed.on_cancel = handle.hold_cleanup(Box::new(move |state| {
            // Caught, with what the panic carries, so the key is let go of whatever `cancel`
            // (or the waker the mark takes out) does.
            let cancelled = catch_unwind(AssertUnwindSafe(|| match state {
                // At the close, a key that completed has nothing to cancel: its wait takes the
                // value.
                Some(state) if table.take_for_cancel(&key, &claim) != ForCancel::Nothing => {
                    cancel(state);
                }
                _ => {
                    crate::unwind::drop_caught(cancel);
                }
            }));
            table.unmark(&key, &claim);
            if let Err(panic) = cancelled {
                crate::unwind::drop_caught(panic);
            }
        }));
        self
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

impl<K: Eq + Hash + Clone + fmt::Debug, V> fmt::Debug for WaitKey<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitKey")
            .field("key", &self.wait.wait().key)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::task::{Context, Poll, Waker};

    use super::Wait;
    use crate::{Backend, Completions, Pump};

    /// Found by a hostile probe: a wait without a cancel hook whose key completed between its
    /// last look and its deadline gave up with `TimedOut` and left the value in the table (89
    /// of 89 such races), where one with a hook returned it: a value that came wins over the
    /// deadline, for both.
    #[test]
    fn a_key_completed_before_the_deadline_was_seen_wins_over_it() {
        let pump = Pump::new(|| {});
        pump.spawn_on(Backend::Thread).expect("a thread");
        let table = Completions::<u32, u32>::new();
        let mut wait = pump.wait_key(&table, 1);
        let keyed = wait.wait.wait_mut();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(keyed.poll_wait(&mut cx).is_pending());
        assert_eq!(table.complete(1, 5), None);
        // What the timeout does once its deadline passed.
        assert_eq!(keyed.cancel(), Some(Ok(5)));
        assert_eq!(table.unclaimed(), 0);
        // Dropped instead, the value stays in the table.
        let mut wait = pump.wait_key(&table, 2);
        assert_eq!(wait.wait.wait_mut().poll_wait(&mut cx), Poll::Pending);
        assert_eq!(table.complete(2, 6), None);
        drop(wait);
        assert_eq!(table.take(&2), Some(6));
    }
}
