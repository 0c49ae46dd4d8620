//! Pump-evaluated waits: the check moves into the pump's registry, and the pump runs it right
//! after each run of the loop, waking the wait only once it succeeded.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use super::Check;
use crate::reentry::{self, Inside};
use crate::registry::{Entry, Evaluate};
use crate::shared::Shared;
use crate::Error;

enum Outcome<T> {
    /// Not complete; the waker of the wait's last poll.
    Waiting(Option<Waker>),
    Ready(T),
    /// The check panicked on the pump; the panic is resumed in the waiting task.
    CheckPanicked(Box<dyn Any + Send>),
    /// The pump closed before the check succeeded.
    Abandoned,
    /// The wait took its outcome.
    Taken,
}

/// Where the pump leaves a wait's outcome, shared by the wait and its registry entry.
struct Slot<T> {
    outcome: Mutex<Outcome<T>>,
    cancelled: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only plain moves happen under this lock: it cannot be left half-updated.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T> Slot<T> {
    /// Completes the slot; the waker to wake, if the wait had polled.
    fn complete(&self, outcome: Outcome<T>) -> Option<Waker> {
        match std::mem::replace(&mut *lock(&self.outcome), outcome) {
            Outcome::Waiting(waker) => waker,
            _ => None,
        }
    }
}

/// The registry's side of a wait: the check, owned by the registry (only the pump calls it, and
/// only under the loop lock), and the wait's slot.
struct Registered<C, T> {
    check: C,
    slot: Arc<Slot<T>>,
}

impl<C, T> Evaluate for Registered<C, T>
where
    C: Check<Output = T> + Send,
    T: Send,
{
    fn evaluate(&mut self) -> Option<Option<Waker>> {
        if self.is_cancelled() {
            return Some(None);
        }
        let outcome = match catch_unwind(AssertUnwindSafe(|| self.check.check())) {
            Ok(None) => return None,
            Ok(Some(value)) => Outcome::Ready(value),
            Err(panic) => Outcome::CheckPanicked(panic),
        };
        Some(self.slot.complete(outcome))
    }

    fn is_cancelled(&self) -> bool {
        self.slot.cancelled.load(Ordering::Relaxed)
    }

    fn abandon(&mut self) -> Option<Waker> {
        self.slot.complete(Outcome::Abandoned)
    }
}

enum Phase {
    /// Not polled yet: not in the registry, not pending.
    New(Entry),
    Registered,
    Done,
}

/// The wait's side of a pump-evaluated wait.
pub(crate) struct OnPump<T> {
    shared: Arc<Shared>,
    slot: Arc<Slot<T>>,
    phase: Phase,
}

impl<T: Send + 'static> OnPump<T> {
    pub(crate) fn new<C>(shared: Arc<Shared>, check: C) -> Self
    where
        C: Check<Output = T> + Send + 'static,
    {
        let slot = Arc::new(Slot {
            outcome: Mutex::new(Outcome::Waiting(None)),
            cancelled: AtomicBool::new(false),
        });
        let entry = Box::new(Registered {
            check,
            slot: slot.clone(),
        });
        OnPump {
            shared,
            slot,
            phase: Phase::New(entry),
        }
    }
}

impl<T> OnPump<T> {
    /// First poll: the check runs at once if the loop lock is free (the fast path); if that fails
    /// or the lock is busy, the entry joins the registry for the pump to evaluate after each run.
    fn register(&mut self, mut entry: Entry, waker: &Waker) -> Result<(), Error> {
        if reentry::is_inside(self.shared.id()) {
            return Err(Error::Reentrant);
        }
        self.shared.status()?;
        if !self.shared.has_driver() {
            return Err(Error::NotRunning);
        }
        *lock(&self.slot.outcome) = Outcome::Waiting(Some(waker.clone()));
        // Held until the entry is registered, so no run slips between this check and the pump's
        // first evaluation of it.
        let guard = self.shared.loop_lock.try_lock_arc();
        if guard.is_some() {
            let _inside = Inside::enter(self.shared.id());
            if entry.evaluate().is_some() {
                return Ok(());
            }
        }
        // Counted before it can be seen by the pump, so a pump going idle never sweeps it.
        self.shared.add_pending();
        self.phase = Phase::Registered;
        if self.shared.registry.insert(entry).is_err() {
            return Err(self.shared.status().err().unwrap_or(Error::Closed));
        }
        Ok(())
    }

    pub(crate) fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, Error>> {
        if let Phase::New(_) = self.phase {
            let Phase::New(entry) = std::mem::replace(&mut self.phase, Phase::Done) else {
                unreachable!("matched above")
            };
            if let Err(err) = self.register(entry, cx.waker()) {
                self.cancel();
                return Poll::Ready(Err(err));
            }
        }
        let mut outcome = lock(&self.slot.outcome);
        match std::mem::replace(&mut *outcome, Outcome::Taken) {
            Outcome::Waiting(waker) => {
                let waker = match waker {
                    Some(waker) if waker.will_wake(cx.waker()) => waker,
                    _ => cx.waker().clone(),
                };
                *outcome = Outcome::Waiting(Some(waker));
                Poll::Pending
            }
            Outcome::Ready(value) => {
                drop(outcome);
                self.finish();
                Poll::Ready(Ok(value))
            }
            Outcome::CheckPanicked(panic) => {
                drop(outcome);
                self.finish();
                resume_unwind(panic)
            }
            Outcome::Abandoned => {
                drop(outcome);
                self.finish();
                Poll::Ready(Err(self.shared.status().err().unwrap_or(Error::Closed)))
            }
            Outcome::Taken => panic!("a wait future was polled after it completed"),
        }
    }

    /// The pump finished with the entry: stop counting as pending.
    fn finish(&mut self) {
        if let Phase::Registered = self.phase {
            self.shared.remove_pending();
        }
        self.phase = Phase::Done;
    }

    /// Gives up (timed out or dropped): the pump drops the entry when it next meets it.
    pub(crate) fn cancel(&mut self) {
        self.slot.cancelled.store(true, Ordering::Relaxed);
        self.finish();
    }
}

impl<T> Drop for OnPump<T> {
    fn drop(&mut self) {
        self.cancel();
    }
}
