//! The broadcast protocol: every wait listens for "loop ran", then checks itself under the
//! loop lock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use event_listener::EventListener;

use super::Check;
use crate::reentry::Inside;
use crate::shared::{LockLoop, LoopGuard, Shared};
use crate::Error;

enum State {
    /// Not polled yet: not counted as pending.
    New,
    /// Listen, then check.
    Check,
    /// Waiting for the loop lock to check.
    Locking(Pin<Box<LockLoop>>),
    /// Checked after round `seen` and failed: waiting for a later run.
    Listening {
        seen: u64,
    },
    Done,
}

/// The broadcast wait: listen for "loop ran", check under the loop lock, repeat.
pub(crate) struct Broadcast<C> {
    shared: Arc<Shared>,
    check: C,
    state: State,
    /// Made before every check, so a run that ends between the check and the await is not missed.
    listener: Option<EventListener>,
}

// The check is only ever called through `&mut`, never pinned, so `Wait` may move freely.
impl<C> Unpin for Broadcast<C> {}

impl<C: Check> Broadcast<C> {
    pub(crate) fn new(shared: Arc<Shared>, check: C) -> Self {
        Broadcast {
            shared,
            check,
            state: State::New,
            listener: None,
        }
    }

    /// First poll: refuse what cannot work, then count the wait as pending.
    fn begin(&mut self) -> Result<(), Error> {
        self.shared.admit_wait()?;
        self.shared.add_pending();
        self.state = State::Check;
        Ok(())
    }

    /// Checks with the loop lock held; otherwise notes the round the check saw.
    fn check_locked(&mut self, guard: LoopGuard) -> Option<C::Output> {
        let seen = self.shared.round();
        let outcome = {
            let _inside = Inside::enter(self.shared.id());
            self.check.check()
        };
        self.shared.unlock(guard);
        if outcome.is_none() {
            self.state = State::Listening { seen };
        }
        outcome
    }

    fn finish(&mut self, outcome: Result<C::Output, Error>) -> Poll<Result<C::Output, Error>> {
        self.cancel();
        Poll::Ready(outcome)
    }

    pub(crate) fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<C::Output, Error>> {
        loop {
            match &mut self.state {
                State::New => {
                    if let Err(err) = self.begin() {
                        return self.finish(Err(err));
                    }
                }
                State::Check => {
                    // Listen before looking at the status, or a close in between goes unheard.
                    self.listener = Some(self.shared.ran.listen());
                    if let Err(err) = self.shared.status() {
                        return self.finish(Err(err));
                    }
                    match self.shared.loop_lock.try_lock_arc() {
                        Some(guard) => {
                            if let Some(value) = self.check_locked(guard) {
                                return self.finish(Ok(value));
                            }
                        }
                        None => {
                            self.state = State::Locking(Box::pin(self.shared.lock_loop()));
                        }
                    }
                }
                State::Locking(lock) => match lock.as_mut().poll(cx) {
                    Poll::Ready(guard) => {
                        if let Some(value) = self.check_locked(guard) {
                            return self.finish(Ok(value));
                        }
                    }
                    Poll::Pending => break,
                },
                State::Listening { seen } => {
                    let seen = *seen;
                    let listener = self
                        .listener
                        .as_mut()
                        .expect("listening without a listener");
                    if Pin::new(listener).poll(cx).is_pending() {
                        break;
                    }
                    // Listen again before looking, so nothing that happens between the look and
                    // the next await goes unheard.
                    self.listener = Some(self.shared.ran.listen());
                    if let Err(err) = self.shared.status() {
                        return self.finish(Err(err));
                    }
                    // Else woken by the run whose result the last check already saw: keep waiting.
                    if self.shared.round() > seen {
                        self.state = State::Check;
                    }
                }
                State::Done => panic!("a wait future was polled after it completed"),
            }
        }
        Poll::Pending
    }
}

impl<C> Broadcast<C> {
    /// Gives up (the wait timed out): stops counting as pending, lets go of lock and listener.
    pub(crate) fn cancel(&mut self) {
        if !matches!(self.state, State::New | State::Done) {
            self.shared.remove_pending();
        }
        self.state = State::Done;
        self.listener = None;
    }
}

impl<C> Drop for Broadcast<C> {
    fn drop(&mut self) {
        self.cancel();
    }
}
