//! The calls a [`LoopHandle`](crate::LoopHandle) sends to the loop's thread, and the one-shot
//! reply of each.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::sync::{lock, Mutex};

/// A call, as the loop's thread runs it: with the state, or dropped unrun if the pump closed.
pub(crate) type Job<S> = Box<dyn FnOnce(&mut S) + Send>;

/// The calls waiting for the loop's thread.
///
/// Pushed from any thread; taken and run by the loop's thread alone, between two runs of the
/// loop. Closed once the thread stops: later calls are refused, queued ones dropped unrun (their
/// callers hear that the pump closed).
pub(crate) struct Calls<S> {
    queue: Mutex<Queue<S>>,
}

struct Queue<S> {
    jobs: Vec<Job<S>>,
    closed: bool,
}

impl<S> Default for Calls<S> {
    fn default() -> Self {
        Calls {
            queue: Mutex::new(Queue {
                jobs: Vec::new(),
                closed: false,
            }),
        }
    }
}

impl<S> Calls<S> {
    /// Queues `job`; hands it back if the loop's thread has stopped.
    pub(crate) fn push(&self, job: Job<S>) -> Result<(), Job<S>> {
        let mut queue = lock(&self.queue);
        if queue.closed {
            return Err(job);
        }
        queue.jobs.push(job);
        Ok(())
    }

    /// Runs every queued call, in order, on the loop's thread. A job catches its own panic.
    pub(crate) fn run_all(&self, state: &mut S) {
        let jobs = std::mem::take(&mut lock(&self.queue).jobs);
        for job in jobs {
            job(state);
        }
    }

    /// Refuses further calls and drops the queued ones unrun, outside the lock (a job's drop
    /// tells its caller).
    pub(crate) fn close(&self) {
        let jobs = {
            let mut queue = lock(&self.queue);
            queue.closed = true;
            std::mem::take(&mut queue.jobs)
        };
        drop(jobs);
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
            Slot::Taken => panic!("a call future was polled after it completed"),
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

impl<R> Answer<R> {
    /// Runs `call` with `state`, catching a panic, and sends the outcome.
    pub(crate) fn run<S>(mut self, state: &mut S, call: impl FnOnce(&mut S) -> R) {
        let outcome = catch_unwind(AssertUnwindSafe(|| call(state)));
        if let Some(reply) = self.reply.take() {
            reply.settle(Slot::Answered(outcome));
        }
    }
}

impl<R> Drop for Answer<R> {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            reply.settle(Slot::Dropped);
        }
    }
}
