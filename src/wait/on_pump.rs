//! Pump-evaluated waits: the check moves into the pump's registry, and the pump runs it right
//! after each run of the loop, waking the wait only once it succeeded.

use std::any::Any;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::Check;
use crate::reentry::{self, Inside};
use crate::registry::{Entry, Evaluate, Finished, Mark};
use crate::shared::Shared;
use crate::sync::{lock, Mutex};
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

/// The state of one pump-evaluated wait that its future and the registry share.
struct Node<T> {
    mark: Mark,
    outcome: Mutex<Outcome<T>>,
}

impl<T> Node<T> {
    /// Completes the wait; the waker to wake, if the wait had polled.
    fn complete(&self, outcome: Outcome<T>) -> Option<Waker> {
        match std::mem::replace(&mut *lock(&self.outcome), outcome) {
            Outcome::Waiting(waker) => waker,
            _ => None,
        }
    }
}

/// The registry's entry of a pump-evaluated wait: its check, which only the holder of the loop
/// lock calls, and the shared state.
struct Slot<C, T> {
    node: Arc<Node<T>>,
    check: C,
}

impl<C, T> Evaluate for Slot<C, T>
where
    C: Check<Output = T> + Send + 'static,
    T: Send + 'static,
{
    #[inline]
    fn evaluate(&mut self, look_for_mark: bool) -> Option<Finished> {
        // Once a wait has given up, its check never runs again (its C object may be gone).
        if look_for_mark && self.node.mark.is_cancelled() {
            return Some(Finished {
                waker: None,
                marked: true,
            });
        }
        let outcome = match catch_unwind(AssertUnwindSafe(|| self.check.check())) {
            Ok(None) => return None,
            Ok(Some(value)) => Outcome::Ready(value),
            Err(panic) => Outcome::CheckPanicked(panic),
        };
        Some(Finished {
            marked: self.node.mark.finish(),
            waker: self.node.complete(outcome),
        })
    }

    fn is_cancelled(&self) -> bool {
        self.node.mark.is_cancelled()
    }

    fn abandon(&self) -> Option<Waker> {
        self.node.complete(Outcome::Abandoned)
    }

    fn admitted(&self, place: u64) {
        self.node.mark.admitted(place);
    }
}

enum Phase {
    /// Not polled yet: not in the registry, not pending.
    New(Entry),
    Registered,
    Done,
}

/// The wait's side of a pump-evaluated wait.
pub(crate) struct OnPump<C, T> {
    shared: Arc<Shared>,
    node: Arc<Node<T>>,
    phase: Phase,
    _check: PhantomData<fn(C)>,
}

impl<C, T> OnPump<C, T>
where
    C: Check<Output = T> + Send + 'static,
    T: Send + 'static,
{
    pub(crate) fn new(shared: Arc<Shared>, check: C) -> Self {
        let node = Arc::new(Node {
            mark: Mark::new(),
            outcome: Mutex::new(Outcome::Waiting(None)),
        });
        let entry: Entry = Box::new(Slot {
            node: node.clone(),
            check,
        });
        OnPump {
            shared,
            node,
            phase: Phase::New(entry),
            _check: PhantomData,
        }
    }
}

impl<C, T> OnPump<C, T> {
    /// First poll: the check runs at once if the loop lock is free (the fast path); if that fails
    /// the entry joins the registry for the pump to evaluate after each run. If the lock is busy,
    /// it joins as not yet evaluated, and its holder evaluates it on letting go.
    fn register(&mut self, mut entry: Entry, waker: &Waker) -> Result<(), Error> {
        self.shared.admit_wait()?;
        *lock(&self.node.outcome) = Outcome::Waiting(Some(waker.clone()));
        let guard = match self.shared.loop_lock.try_lock_arc() {
            Some(guard) => {
                let finished = {
                    let _inside = Inside::enter(self.shared.id());
                    entry.evaluate(false).is_some()
                };
                if finished {
                    self.shared.unlock(guard);
                    return Ok(());
                }
                Some(guard)
            }
            None => None,
        };
        // Counted before it can be seen by the pump, so a pump going idle never sweeps it.
        self.shared.add_pending();
        self.phase = Phase::Registered;
        let inserted = match guard {
            // Still held, so no run slips between this check and the pump's next evaluation.
            Some(guard) => {
                let inserted = self.shared.registry.insert_evaluated(entry);
                self.shared.unlock(guard);
                inserted
            }
            None => {
                let inserted = self.shared.registry.insert(entry);
                self.shared.settle();
                inserted
            }
        };
        if inserted.is_err() {
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
        let mut outcome = lock(&self.node.outcome);
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

    /// Gives up (timed out or dropped): the check is never called again once this returns (a
    /// run of it in progress on the pump finishes first, a matter of the few checks of its
    /// block); the pump drops the entry when it next meets it.
    pub(crate) fn cancel(&mut self) {
        if let Phase::Registered = self.phase {
            let inside = reentry::is_inside(self.shared.id());
            self.shared.registry.withdraw(&self.node.mark, inside);
        }
        self.finish();
    }
}

impl<C, T> Drop for OnPump<C, T> {
    fn drop(&mut self) {
        self.cancel();
    }
}
