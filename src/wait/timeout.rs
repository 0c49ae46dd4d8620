//! [`Timeout`]: one deadline for every kind of wait.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::reactor::Timer;
use crate::Error;

/// A wait protocol: what [`Timeout`] drives.
pub(crate) trait Wait: Unpin {
    type Output;

    /// Polls the wait: `Ready` once it ended (with its value or why not).
    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::Output, Error>>;

    /// Gives up (timed out): afterwards the wait leaves nothing behind in the pump. Its `Drop`
    /// does the same. Returns what the wait ended with meanwhile, if it did (its check succeeded
    /// in a pass under way, its key completed): a wait that is ready wins over its deadline,
    /// and nothing its check handed out is lost.
    fn cancel(&mut self) -> Option<Result<Self::Output, Error>>;

    /// The id of the pump it waits on, to tell whether this thread is inside that pump.
    fn pump_id(&self) -> usize;
}

/// A wait and its optional deadline: polls the wait first, then the timer, so a wait that is
/// ready wins over a deadline that passed meanwhile.
pub(crate) struct Timeout<W> {
    wait: W,
    timer: Option<Timer>,
    done: bool,
}

impl<W> Timeout<W> {
    pub(crate) fn new(wait: W) -> Self {
        Timeout {
            wait,
            timer: None,
            done: false,
        }
    }

    /// Gives up `timeout` from now; a timeout past the clock's range never fires.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.set_deadline(Instant::now().checked_add(timeout));
    }

    /// Gives up at `deadline`; `None` never.
    pub(crate) fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.timer = Some(deadline.map_or_else(Timer::never, Timer::at));
    }

    /// The wait.
    pub(crate) fn wait(&self) -> &W {
        &self.wait
    }

    pub(crate) fn wait_mut(&mut self) -> &mut W {
        &mut self.wait
    }
}

impl<W: Wait> Timeout<W> {
    /// # Panics
    ///
    /// If polled again after it completed.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<W::Output, Error>> {
        assert!(!self.done, "a wait future was polled after it completed");
        if let Poll::Ready(outcome) = self.wait.poll_wait(cx) {
            self.done = true;
            self.timer = None;
            return Poll::Ready(outcome);
        }
        // Polled inside its own pump (made or first polled elsewhere): waiting here would wait
        // for this thread. It gives up, with what it reached meanwhile if anything.
        if crate::reentry::is_inside(self.wait.pump_id()) {
            self.done = true;
            self.timer = None;
            return Poll::Ready(self.wait.cancel().unwrap_or(Err(Error::Reentrant)));
        }
        if let Some(timer) = &mut self.timer {
            if Pin::new(timer).poll(cx).is_ready() {
                self.done = true;
                self.timer = None;
                return Poll::Ready(self.wait.cancel().unwrap_or(Err(Error::TimedOut)));
            }
        }
        Poll::Pending
    }
}
