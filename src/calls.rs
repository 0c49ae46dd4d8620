//! The calls a [`LoopHandle`](crate::LoopHandle) sends to the loop's thread, and the one-shot
//! reply of each.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::sync::{lock, Mutex};

/// A call, as the loop's thread runs it: with the state, or dropped unrun if the pump closed.
pub(crate) type Job<S> = Box<dyn FnOnce(&mut S) + Send>;

/// A wait's cleanup in C ([`WaitKey::on_cancel`](crate::WaitKey::on_cancel)), as the loop's
/// thread runs it: with the state, or with `None` when there is no state to run it with (the
/// factory failed), so it can still tidy up what it stands for. It catches its own panic.
pub(crate) type Cleanup<S> = Box<dyn FnOnce(Option<&mut S>) + Send>;

/// Names a cleanup held by [`Calls::hold`].
pub(crate) type Ticket = u64;

enum Queued<S> {
    Call(Job<S>),
    Cleanup(Cleanup<S>),
}

/// The calls waiting for the loop's thread, and the cleanups it owes the waits that may still
/// give up.
///
/// Pushed from any thread; taken and run by the loop's thread alone, between two runs of the
/// loop. Closed once the thread stops: later calls are refused, queued ones dropped unrun (their
/// callers hear that the pump closed), and every cleanup still owed — queued, or held for a
/// wait that has not ended — runs then, with the state, before the state is dropped: a wait that
/// ends because the pump closed gave up too, and its C object must go before its library does.
pub(crate) struct Calls<S> {
    queue: Mutex<Queue<S>>,
    /// The next [`RequestId`](crate::RequestId) of this loop.
    next_request: crate::sync::AtomicU64,
}

struct Queue<S> {
    jobs: Vec<Queued<S>>,
    /// The cleanups of waits that have not ended, by ticket.
    held: HashMap<Ticket, Cleanup<S>>,
    next_ticket: Ticket,
    closed: bool,
}

impl<S> Default for Calls<S> {
    fn default() -> Self {
        Calls {
            queue: Mutex::new(Queue {
                jobs: Vec::new(),
                held: HashMap::new(),
                next_ticket: 0,
                closed: false,
            }),
            next_request: crate::sync::AtomicU64::new(0),
        }
    }
}

impl<S: 'static> crate::kept::Forget for Calls<S> {
    fn forget(&self, key: crate::kept::Key) {
        // Not kicked: the value can wait for the next run. Refused once closed: the loop's
        // thread drops what is left as it ends.
        let _ = self.push(Box::new(move |_: &mut S| {
            crate::kept::forget_here(key);
        }));
    }
}

impl<S> Calls<S> {
    /// A request id not given out before on this loop.
    pub(crate) fn next_request(&self) -> u64 {
        self.next_request
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Queues `job`; hands it back if the loop's thread has stopped.
    pub(crate) fn push(&self, job: Job<S>) -> Result<(), Job<S>> {
        let mut queue = lock(&self.queue);
        if queue.closed {
            return Err(job);
        }
        queue.jobs.push(Queued::Call(job));
        Ok(())
    }

    /// Holds `cleanup` until the wait it belongs to either [`fire`](Calls::fire)s it or
    /// [`release`](Calls::release)s it; runs it at the close if neither happened. Hands it back
    /// if the loop's thread has stopped.
    pub(crate) fn hold(&self, cleanup: Cleanup<S>) -> Result<Ticket, Cleanup<S>> {
        let mut queue = lock(&self.queue);
        if queue.closed {
            return Err(cleanup);
        }
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        queue.held.insert(ticket, cleanup);
        Ok(ticket)
    }

    /// The wait gave up: queues its cleanup for the loop's thread. `false` if the cleanup is no
    /// longer held: the loop's thread took it as it stopped (and ran it, or had no state to).
    pub(crate) fn fire(&self, ticket: Ticket) -> bool {
        let mut queue = lock(&self.queue);
        match queue.held.remove(&ticket) {
            Some(cleanup) => {
                queue.jobs.push(Queued::Cleanup(cleanup));
                true
            }
            None => false,
        }
    }

    /// The wait got its value: its cleanup will not be needed. Dropped outside the lock.
    pub(crate) fn release(&self, ticket: Ticket) {
        let cleanup = lock(&self.queue).held.remove(&ticket);
        if let Some(cleanup) = cleanup {
            crate::unwind::drop_caught(cleanup);
        }
    }

    /// Runs every queued call and cleanup, in order, on the loop's thread, none of their panics
    /// going further — until the pump is `closed`: what is left then (a job before closed it,
    /// or another thread did) goes back to the queue for [`close`](Calls::close), which drops
    /// the calls unrun and runs the cleanups.
    pub(crate) fn run_all(&self, state: &mut S, closed: impl Fn() -> bool) {
        let mut jobs = std::mem::take(&mut lock(&self.queue).jobs).into_iter();
        while let Some(job) = jobs.next() {
            if closed() {
                let mut queue = lock(&self.queue);
                let newer = std::mem::take(&mut queue.jobs);
                queue.jobs = std::iter::once(job).chain(jobs).chain(newer).collect();
                return;
            }
            // A job catches its closure's panic, but not one in dropping what it leaves behind
            // (a call's value nobody waits for): caught here, so the rest of the batch runs.
            crate::unwind::run_caught(|| match job {
                Queued::Call(job) => job(state),
                Queued::Cleanup(cleanup) => cleanup(Some(state)),
            });
        }
    }

    /// Refuses further calls and cleanups, drops the queued calls unrun (a job's drop tells its
    /// caller), and runs every cleanup still owed with `state` (`None`: the loop never had
    /// one). Outside the lock; on the loop's thread.
    pub(crate) fn close(&self, mut state: Option<&mut S>) {
        let (jobs, held) = {
            let mut queue = lock(&self.queue);
            queue.closed = true;
            (
                std::mem::take(&mut queue.jobs),
                std::mem::take(&mut queue.held),
            )
        };
        let mut cleanups = Vec::new();
        for job in jobs {
            match job {
                Queued::Call(call) => {
                    crate::unwind::drop_caught(call);
                }
                Queued::Cleanup(cleanup) => cleanups.push(cleanup),
            }
        }
        let mut held: Vec<_> = held.into_iter().collect();
        held.sort_unstable_by_key(|(ticket, _)| *ticket);
        cleanups.extend(held.into_iter().map(|(_, cleanup)| cleanup));
        for cleanup in cleanups {
            crate::unwind::run_caught(|| cleanup(state.as_deref_mut()));
        }
    }
}

/// What a call's caller gets back: the closure's value, or its panic.
pub(crate) type Outcome<R> = std::thread::Result<R>;

enum Slot<R> {
    /// No answer yet; the waker of the caller's last poll.
    Waiting(Option<Waker>),
    Answered(Outcome<R>),
    /// The job was dropped unrun: the pump closed.
    Dropped,
    /// The caller took the answer.
    Taken,
    /// The caller was refused waiting for it (on the loop's own thread): the job is dropped
    /// unrun.
    Refused,
}

/// The shared slot of one call's reply.
pub(crate) struct Reply<R> {
    slot: Mutex<Slot<R>>,
}

/// The loop thread's end of a [`Reply`]: answers once, or, dropped unanswered, says the call was
/// never run.
pub(crate) struct Answer<R> {
    reply: Option<Arc<Reply<R>>>,
}

impl<R> Reply<R> {
    /// A reply slot and the end that answers it.
    pub(crate) fn new() -> (Arc<Reply<R>>, Answer<R>) {
        let reply = Arc::new(Reply {
            slot: Mutex::new(Slot::Waiting(None)),
        });
        let answer = Answer {
            reply: Some(reply.clone()),
        };
        (reply, answer)
    }

    /// `Ready(Some(outcome))` once answered, `Ready(None)` if the call was dropped unrun.
    ///
    /// # Panics
    ///
    /// If polled again after it returned `Ready`.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Option<Outcome<R>>> {
        let mut slot = lock(&self.slot);
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Waiting(waker) => {
                let waker = match waker {
                    Some(waker) if waker.will_wake(cx.waker()) => waker,
                    _ => cx.waker().clone(),
                };
                *slot = Slot::Waiting(Some(waker));
                Poll::Pending
            }
            Slot::Answered(outcome) => Poll::Ready(Some(outcome)),
            Slot::Dropped => Poll::Ready(None),
            Slot::Taken | Slot::Refused => panic!("a call future was polled after it completed"),
        }
    }

    /// The caller will not wait (it is on the loop's thread): a job not run yet is dropped
    /// unrun when its turn comes. Its answer, if it ran already.
    pub(crate) fn refuse(&self) -> Option<Outcome<R>> {
        let mut slot = lock(&self.slot);
        match std::mem::replace(&mut *slot, Slot::Refused) {
            Slot::Answered(outcome) => {
                *slot = Slot::Taken;
                Some(outcome)
            }
            _ => None,
        }
    }

    fn settle(&self, with: Slot<R>) {
        let waker = match std::mem::replace(&mut *lock(&self.slot), with) {
            Slot::Waiting(waker) => waker,
            _ => None,
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<R> Drop for Reply<R> {
    /// An answer nobody took goes with the slot, wherever its last holder lets go — the caller
    /// that dropped its `Call` unpolled (on smol a task's drop must not panic: it aborts), or the
    /// loop's thread answering a call dropped meanwhile — with its panic (or its panic payload's)
    /// caught.
    fn drop(&mut self) {
        let slot = self.slot.get_mut().unwrap_or_else(PoisonError::into_inner);
        let slot = std::mem::replace(slot, Slot::Taken);
        if let Slot::Answered(outcome) = slot {
            crate::unwind::drop_caught(outcome);
        }
    }
}

impl<R> Answer<R> {
    /// Runs `call` with `state`, catching a panic, and sends the outcome.
    pub(crate) fn run<S>(mut self, state: &mut S, call: impl FnOnce(&mut S) -> R) {
        let Some(reply) = self.reply.take() else {
            return;
        };
        if matches!(*lock(&reply.slot), Slot::Refused) {
            crate::unwind::drop_caught(call);
            return;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| call(state)));
        reply.settle(Slot::Answered(outcome));
    }
}

impl<R> Drop for Answer<R> {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            reply.settle(Slot::Dropped);
        }
    }
}
