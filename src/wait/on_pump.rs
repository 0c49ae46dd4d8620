//! Pump-evaluated waits: the check moves into the pump's registry, and the pump runs it right
//! after each run of the loop, waking the wait only once it succeeded.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll, Waker};

use super::{Check, Wait};
use crate::core::{evaluate_arrivals, Core, LoopGuard};
use crate::reentry;
use crate::registry::{Evaluate, Evaluated, Finished, Mark};
use crate::sync::{lock, Mutex};
use crate::unwind::drop_caught;
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

impl<T> Drop for Node<T> {
    /// What the check found and nobody took goes with the node, wherever its last holder lets
    /// go — a wait dropped unpolled after its check ended it (a task cancelled: on smol a task's
    /// drop must not panic), or the pump dropping the entry — with its panic caught.
    fn drop(&mut self) {
        let outcome = self
            .outcome
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        let outcome = std::mem::replace(outcome, Outcome::Taken);
        if matches!(outcome, Outcome::Ready(_) | Outcome::CheckPanicked(_)) {
            drop_caught(outcome);
        }
    }
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
/// lock calls, and the state it shares with the wait.
struct CheckEntry<C, T> {
    node: Arc<Node<T>>,
    check: C,
}

impl<C, T> Evaluate for CheckEntry<C, T>
where
    C: Check<Output = T> + Send + 'static,
    T: Send + 'static,
{
    /// The check's value, or its panic.
    type Checked = Result<T, Box<dyn Any + Send>>;

    #[inline]
    fn evaluate(&mut self, look_for_mark: bool) -> Evaluated<Self::Checked> {
        // Once a wait has given up, its check never runs again (its C object may be gone).
        if look_for_mark && self.node.mark.is_cancelled() {
            return Evaluated::GaveUp;
        }
        match catch_unwind(AssertUnwindSafe(|| self.check.check())) {
            Ok(None) => Evaluated::Pending,
            Ok(Some(value)) => Evaluated::Checked(Ok(value)),
            Err(panic) => Evaluated::Checked(Err(panic)),
        }
    }

    fn prefetch(&self) {
        self.node.mark.touch();
    }

    fn finish(&self, checked: Self::Checked) -> Finished {
        // The outcome first: a wait that finds its mark finished as it gives up finds the
        // outcome there too.
        let waker = self.node.complete(match checked {
            Ok(value) => Outcome::Ready(value),
            Err(panic) => Outcome::CheckPanicked(panic),
        });
        Finished {
            marked: self.node.mark.finish(),
            waker,
        }
    }

    fn is_cancelled(&self) -> bool {
        self.node.mark.is_cancelled()
    }

    fn abandon(&self) -> Option<Waker> {
        self.node.complete(Outcome::Abandoned)
    }

    fn stored_at(&self, place: u64) {
        self.node.mark.stored_at(place);
    }
}

enum State<C, T> {
    /// Not polled yet: not in the registry, not pending; only its check. Its first poll runs the
    /// check at once if it can, and only a wait that has to wait gets the state it shares with
    /// the registry and an entry there (unboxed in its column, boxed only among the arrivals).
    New(C),
    /// In the registry, counted pending in the pump's demand (uncounted by
    /// [`OnPump::leave_registered`], the way out of this state), with what it shares with its
    /// entry there.
    Registered(Arc<Node<T>>),
    /// Finished (its first check succeeded, it ended, or it gave up).
    Done,
}

/// The wait's side of a pump-evaluated wait.
pub(crate) struct OnPump<C, T> {
    core: Arc<Core>,
    state: State<C, T>,
    /// [`OnPump::register`], taken where the check's bounds are known, so the wait's other code
    /// needs none.
    register: Register<C, T>,
}

type Register<C, T> = fn(&mut OnPump<C, T>, C, &Waker) -> Result<Registered<T>, Error>;

/// What a first poll's registration did.
enum Registered<T> {
    /// The check succeeded at once, with the loop lock free: nothing was registered.
    Ready(T),
    /// The entry went into its column, not complete, with this poll's waker stored: whatever
    /// completes it wakes that waker, so the poll can return `Pending` without a look.
    Stored,
    /// The entry went among the arrivals (which this very poll may have evaluated): the outcome
    /// says whether it is complete.
    LookAtOutcome,
}

// The check is moved in and out whole, never pinned in place: the wait moves freely.
impl<C, T> Unpin for OnPump<C, T> {}

impl<C, T> OnPump<C, T>
where
    C: Check<Output = T> + Send + 'static,
    T: Send + 'static,
{
    pub(crate) fn new(core: Arc<Core>, check: C) -> Self {
        OnPump {
            core,
            state: State::New(check),
            register: Self::register,
        }
    }

    /// First poll: the check runs at once if the loop lock is free (the fast path, which
    /// allocates nothing); if that fails the entry joins the registry for the pump to evaluate
    /// after each run. If the lock is busy, it joins as not yet evaluated, and the lock's holder
    /// evaluates it on letting go.
    fn register(&mut self, mut check: C, waker: &Waker) -> Result<Registered<T>, Error> {
        // Refused (a closed pump): what the check captured goes here, its panic kept from the
        // awaiting task, as everywhere the pump drops it.
        if let Err(why) = self.core.may_wait() {
            drop_caught(check);
            return Err(why);
        }
        let guard = LoopGuard::try_new(&self.core);
        let checked = (guard.as_ref())
            .map(|guard| guard.check(|| catch_unwind(AssertUnwindSafe(|| check.check()))));
        let first = match checked {
            Some(Ok(first)) => Some(first),
            Some(Err(why)) => {
                drop(guard);
                drop_caught(check);
                return Err(why);
            }
            None => None,
        };
        match first {
            Some(Ok(None)) | None => {}
            Some(Ok(Some(value))) => {
                drop(guard);
                // What the check captured goes now, with no lock held, its panic kept from the
                // awaiting task.
                drop_caught(check);
                return Ok(Registered::Ready(value));
            }
            Some(Err(panic)) => {
                drop(guard);
                drop_caught(check);
                resume_unwind(panic)
            }
        }
        let node = Arc::new(Node {
            mark: Mark::new(),
            outcome: Mutex::new(Outcome::Waiting(Some(waker.clone()))),
        });
        // Counted before the pump can see it, so a pump going idle never sweeps it; uncounted
        // on the way out of `Registered`. The count is the pump's, not a `Pending` of its own:
        // this wait holds the core already.
        self.core.demand.add_pending();
        self.state = State::Registered(node.clone());
        let entry = CheckEntry { node, check };
        // `Err` once the pump closed: the registry refuses the entry.
        let registered = match guard {
            // Still held, so no run slips between this check and the pump's next evaluation; the
            // entry goes into its column as it is. Letting go evaluates the arrivals.
            Some(guard) => {
                let refused = self.core.registry.insert_evaluated(entry);
                drop(guard);
                // A refused entry's captures are dropped with the lock let go, as on the fast path.
                refused.map(|()| Registered::Stored).map_err(drop_caught)
            }
            // Boxed to wait among the arrivals, whatever its type; the holder may have let go
            // before the entry arrived.
            None => match self.core.registry.insert(Box::new(entry)) {
                Ok(()) => {
                    evaluate_arrivals(&self.core);
                    Ok(Registered::LookAtOutcome)
                }
                Err(refused) => Err(drop_caught(refused)),
            },
        };
        registered.map_err(|_drop_panicked| self.core.status().err().unwrap_or(Error::Closed))
    }
}

impl<C, T> OnPump<C, T> {
    /// Gives up (timed out, dropped, or its registration failed): the check is never called
    /// again once this returns (a run of it in progress on the pump finishes first, a matter of
    /// the few checks of its block); the pump drops the entry when it next meets it.
    ///
    /// With `keep_outcome` (a timeout), also returns what the check found meanwhile: a check that
    /// ended the wait in the pass under way is told to it only once the pass finished its
    /// entries, so the wait waits for that pass (not from inside one of its checks) and takes
    /// the outcome.
    fn give_up(&mut self, keep_outcome: bool) -> Option<Outcome<T>> {
        let (mut ended, withdrew) = (None, matches!(self.state, State::Registered(_)));
        if let State::Registered(node) = &self.state {
            let inside = reentry::is_inside(self.core.id());
            self.core.registry.withdraw(&node.mark, inside);
            if keep_outcome {
                if !inside {
                    self.core.registry.wait_pass_out();
                }
                let mut outcome = lock(&node.outcome);
                if matches!(*outcome, Outcome::Ready(_) | Outcome::CheckPanicked(_)) {
                    ended = Some(std::mem::replace(&mut *outcome, Outcome::Taken));
                }
            }
        }
        self.leave_registered();
        if withdrew && self.core.registry.sweep_due(self.core.demand.pending()) {
            self.core.demand.sweep();
        }
        ended
    }

    /// Ends the wait's state (it is done), uncounting it from the pump's demand if it was
    /// registered.
    fn leave_registered(&mut self) {
        if let State::Registered(_) = std::mem::replace(&mut self.state, State::Done) {
            self.core.demand.remove_pending();
        }
    }
}

impl<C, T> Wait for OnPump<C, T> {
    type Output = T;

    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, Error>> {
        if let State::New(_) = self.state {
            let State::New(check) = std::mem::replace(&mut self.state, State::Done) else {
                unreachable!("matched above")
            };
            match (self.register)(self, check, cx.waker()) {
                Ok(Registered::Ready(value)) => return Poll::Ready(Ok(value)),
                Ok(Registered::Stored) => return Poll::Pending,
                Ok(Registered::LookAtOutcome) => {}
                Err(err) => {
                    self.give_up(false);
                    return Poll::Ready(Err(err));
                }
            }
        }
        let State::Registered(node) = &self.state else {
            panic!("a wait future was polled after it completed")
        };
        let mut outcome = lock(&node.outcome);
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
                self.leave_registered();
                Poll::Ready(Ok(value))
            }
            Outcome::CheckPanicked(panic) => {
                drop(outcome);
                self.leave_registered();
                resume_unwind(panic)
            }
            Outcome::Abandoned => {
                drop(outcome);
                self.leave_registered();
                Poll::Ready(Err(self.core.status().err().unwrap_or(Error::Closed)))
            }
            Outcome::Taken => panic!("a wait future was polled after it completed"),
        }
    }

    fn cancel(&mut self) -> Option<Result<T, Error>> {
        match self.give_up(true)? {
            Outcome::Ready(value) => Some(Ok(value)),
            Outcome::CheckPanicked(panic) => resume_unwind(panic),
            _ => None,
        }
    }

    fn pump_id(&self) -> usize {
        self.core.id()
    }
}

impl<C, T> Drop for OnPump<C, T> {
    fn drop(&mut self) {
        // Never polled, it still holds its check: what that captured goes as the pump drops a
        // check's, its panic kept from the task.
        if let State::New(_) = self.state {
            if let State::New(check) = std::mem::replace(&mut self.state, State::Done) {
                drop_caught(check);
            }
        }
        // Nobody takes what the check found: it goes with the wait.
        self.give_up(false);
    }
}
