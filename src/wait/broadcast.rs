//! The broadcast protocol: every wait listens for "the loop ran", then checks itself under the
//! loop lock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use event_listener::EventListener;

use super::{Check, Pending, Wait};
use crate::core::{Core, Lock, LoopGuard};
use crate::unwind::DropCaught;
use crate::Error;

enum State {
    /// Not polled yet: not counted as pending.
    New,
    /// About to listen, then look at the status and take the loop lock to check.
    Look {
        pending: Pending,
    },
    /// Waiting for the loop lock to check; `listener` was made before the look (or the last
    /// announcement it heard), and is polled too, so a close ends the wait here.
    Locking {
        pending: Pending,
        listener: EventListener,
        lock: Pin<Box<Lock>>,
    },
    /// Checked after round `seen` and failed: waiting for a later run. `listener` was made before
    /// the check, so a run that ends between the check and the await is not missed.
    Listening {
        pending: Pending,
        listener: EventListener,
        seen: u64,
    },
    Done,
}

/// The broadcast wait: listen for "the loop ran", check under the loop lock, repeat.
pub(crate) struct Broadcast<C> {
    core: Arc<Core>,
    /// Runs in the waiting task, but what it captured is dropped as everywhere the pump drops a
    /// check: its panic kept from the task.
    check: DropCaught<C>,
    state: State,
}

// The check is only ever called through `&mut`, never pinned, so the wait may move freely.
impl<C> Unpin for Broadcast<C> {}

impl<C: Check> Broadcast<C> {
    pub(crate) fn new(core: Arc<Core>, check: C) -> Self {
        Broadcast {
            core,
            check: DropCaught::new(check),
            state: State::New,
        }
    }
}

/// Checks under `guard`, then lets go: the value (or why the pump closed), or, if the check
/// failed, the state that waits for a run after the one it saw.
fn check_under<C: Check>(
    core: &Core,
    guard: LoopGuard<'_>,
    check: &mut C,
    pending: Pending,
    listener: EventListener,
) -> Result<Result<C::Output, Error>, State> {
    let seen = core.rounds.now().round();
    let outcome = guard.check(|| check.check());
    drop(guard);
    match outcome {
        Ok(None) => Err(State::Listening {
            pending,
            listener,
            seen,
        }),
        Ok(Some(value)) => Ok(Ok(value)),
        Err(why) => Ok(Err(why)),
    }
}

impl<C: Check> Wait for Broadcast<C> {
    type Output = C::Output;

    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<C::Output, Error>> {
        loop {
            // Taken out, so a state's data moves into the next one; `Done` stays if this returns
            // or panics (a panicking check), which drops the pending count and the listener.
            // A state that got hold of the loop lock hands it on, to check under it below.
            let held = match std::mem::replace(&mut self.state, State::Done) {
                State::New => {
                    self.core.may_wait()?;
                    self.state = State::Look {
                        pending: Pending::count(&self.core),
                    };
                    None
                }
                State::Look { pending } => {
                    // Listen before looking at the status, or a close in between goes unheard.
                    let listener = self.core.rounds.listen();
                    self.core.status()?;
                    match LoopGuard::try_new(&self.core) {
                        Some(guard) => Some((guard, pending, listener)),
                        None => {
                            self.state = State::Locking {
                                pending,
                                listener,
                                lock: Box::pin(self.core.loop_lock.lock()),
                            };
                            None
                        }
                    }
                }
                State::Locking {
                    pending,
                    mut listener,
                    mut lock,
                } => match lock.as_mut().poll(cx) {
                    Poll::Ready(raw) => Some((LoopGuard::new(&self.core, raw), pending, listener)),
                    // The listener is polled too: a close while this wait queues behind a long
                    // run ends it at once, as it ends a listening wait, not once the run let go
                    // of the lock. A run that ended meanwhile is no news to the check to come:
                    // it listens again, before that check, and queues on.
                    Poll::Pending if Pin::new(&mut listener).poll(cx).is_ready() => {
                        let listener = self.core.rounds.listen();
                        self.core.status()?;
                        self.state = State::Locking {
                            pending,
                            listener,
                            lock,
                        };
                        None
                    }
                    Poll::Pending => {
                        self.state = State::Locking {
                            pending,
                            listener,
                            lock,
                        };
                        return Poll::Pending;
                    }
                },
                State::Listening {
                    pending,
                    mut listener,
                    seen,
                } => {
                    if Pin::new(&mut listener).poll(cx).is_pending() {
                        self.state = State::Listening {
                            pending,
                            listener,
                            seen,
                        };
                        return Poll::Pending;
                    }
                    // Listen again before looking, so nothing that happens between the look and
                    // the next await goes unheard.
                    let listener = self.core.rounds.listen();
                    self.core.status()?;
                    self.state = if self.core.rounds.now().round() > seen {
                        State::Look { pending }
                    } else {
                        // Woken by the run whose result the last check already saw.
                        State::Listening {
                            pending,
                            listener,
                            seen,
                        }
                    };
                    None
                }
                State::Done => panic!("a wait future was polled after it completed"),
            };
            if let Some((guard, pending, listener)) = held {
                let checked =
                    check_under(&self.core, guard, self.check.get_mut(), pending, listener);
                match checked {
                    Ok(outcome) => return Poll::Ready(outcome),
                    Err(listening) => self.state = listening,
                }
            }
        }
    }

    fn cancel(&mut self) -> Option<Result<Self::Output, Error>> {
        // Its check runs in its own poll only: nothing can have ended it meanwhile.
        self.state = State::Done;
        None
    }

    fn pump_id(&self) -> usize {
        self.core.id()
    }
}
