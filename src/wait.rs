//! The wait futures: [`WaitUntil`] and [`WaitFor`], and the broadcast protocol behind them.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_io::Timer;
use async_lock::futures::LockArc;
use event_listener::EventListener;

use crate::reentry::{self, Inside};
use crate::shared::{LoopGuard, Runner, Shared};
use crate::Error;

/// A status check run by a wait, always under the loop lock (never while the loop runs).
///
/// This is the seam between the public wait futures and how they learn that their condition
/// holds; the broadcast protocol in [`Wait`] is one strategy behind it.
pub(crate) trait Check {
    type Output;

    fn check(&mut self) -> Option<Self::Output>;
}

/// `FnMut() -> bool` as a [`Check`].
pub(crate) struct Until<F>(F);

impl<F: FnMut() -> bool> Check for Until<F> {
    type Output = ();

    fn check(&mut self) -> Option<()> {
        (self.0)().then_some(())
    }
}

/// `FnMut() -> Option<T>` as a [`Check`].
pub(crate) struct For<F, T>(F, PhantomData<fn() -> T>);

impl<F: FnMut() -> Option<T>, T> Check for For<F, T> {
    type Output = T;

    fn check(&mut self) -> Option<T> {
        (self.0)()
    }
}

enum State {
    /// Not polled yet: not counted as pending.
    New,
    /// Listen, then check.
    Check,
    /// Waiting for the loop lock to check.
    Locking(Pin<Box<LockArc<Runner>>>),
    /// Checked after round `seen` and failed: waiting for a later run.
    Listening {
        seen: u64,
    },
    Done,
}

/// The broadcast wait: listen for "loop ran", check under the loop lock, repeat.
struct Wait<C> {
    shared: Arc<Shared>,
    check: C,
    state: State,
    /// Made before every check, so a run that ends between the check and the await is not missed.
    listener: Option<EventListener>,
    timer: Option<Timer>,
}

// The check is only ever called through `&mut`, never pinned, so `Wait` may move freely.
impl<C> Unpin for Wait<C> {}

impl<C: Check> Wait<C> {
    fn new(shared: Arc<Shared>, check: C) -> Self {
        Wait {
            shared,
            check,
            state: State::New,
            listener: None,
            timer: None,
        }
    }

    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.timer = Some(deadline.map_or_else(Timer::never, Timer::at));
    }

    fn set_timeout(&mut self, timeout: Duration) {
        self.set_deadline(Instant::now().checked_add(timeout));
    }

    /// First poll: refuse what cannot work, then count the wait as pending.
    fn begin(&mut self) -> Result<(), Error> {
        if reentry::is_inside(self.shared.id()) {
            return Err(Error::Reentrant);
        }
        self.shared.status()?;
        if !self.shared.has_driver() {
            return Err(Error::NotRunning);
        }
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
        drop(guard);
        if outcome.is_none() {
            self.state = State::Listening { seen };
        }
        outcome
    }

    fn finish(&mut self, outcome: Result<C::Output, Error>) -> Poll<Result<C::Output, Error>> {
        if !matches!(self.state, State::New) {
            self.shared.remove_pending();
        }
        self.state = State::Done;
        self.listener = None;
        self.timer = None;
        Poll::Ready(outcome)
    }

    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<C::Output, Error>> {
        loop {
            match &mut self.state {
                State::New => {
                    if let Err(err) = self.begin() {
                        return self.finish(Err(err));
                    }
                }
                State::Check => {
                    if let Err(err) = self.shared.status() {
                        return self.finish(Err(err));
                    }
                    self.listener = Some(self.shared.ran.listen());
                    match self.shared.loop_lock.try_lock_arc() {
                        Some(guard) => {
                            if let Some(value) = self.check_locked(guard) {
                                return self.finish(Ok(value));
                            }
                        }
                        None => {
                            self.state = State::Locking(Box::pin(self.shared.loop_lock.lock_arc()));
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
                    if let Err(err) = self.shared.status() {
                        return self.finish(Err(err));
                    }
                    if self.shared.round() > seen {
                        self.state = State::Check;
                    } else {
                        // Woken by the run whose result the last check already saw: wait for
                        // the next one (listening first, then looking at the round again).
                        self.listener = Some(self.shared.ran.listen());
                        if self.shared.round() > seen {
                            self.state = State::Check;
                        }
                    }
                }
                State::Done => panic!("a wait future was polled after it completed"),
            }
        }
        if let Some(timer) = &mut self.timer {
            if Pin::new(timer).poll(cx).is_ready() {
                return self.finish(Err(Error::TimedOut));
            }
        }
        Poll::Pending
    }
}

impl<C> Drop for Wait<C> {
    fn drop(&mut self) {
        if !matches!(self.state, State::New | State::Done) {
            self.shared.remove_pending();
        }
    }
}

macro_rules! wait_future_docs {
    () => {
        "\n\n# Cancel safety\n\n\
        Dropping the future at any point (a `select`, an outer timeout, an aborted task) removes \
        it from the pump: it stops counting as pending, gives up its place in the loop lock's \
        queue, and its listener leaves without swallowing the notification of any other wait. \
        Nothing is left to clean up, and the condition can simply be awaited again.\n\n\
        # Panics\n\n\
        Panics if polled again after it completed, like most futures. A panic in the check \
        itself propagates to the task that awaits this future; the loop lock is released.\n"
    };
}

/// Future returned by [`Pump::wait_until`](crate::Pump::wait_until): resolves once its check
/// returns `true`.
///
/// The check runs under the pump's loop lock, never at the same time as `run_once` or another
/// check, and is called again only after the loop has run since its last call.
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # futures_lite::future::block_on(async {
/// // Stand-in for a C library: the third run completes the job.
/// let runs = Arc::new(AtomicU32::new(0));
/// let counter = runs.clone();
/// let pump = Pump::new(move || {
///     counter.fetch_add(1, Ordering::SeqCst);
/// });
/// pump.spawn();
///
/// pump.wait_until(move || runs.load(Ordering::SeqCst) >= 3)
///     .timeout(Duration::from_secs(2))
///     .await?;
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[doc = wait_future_docs!()]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct WaitUntil<F> {
    wait: Wait<Until<F>>,
}

impl<F: FnMut() -> bool> WaitUntil<F> {
    pub(crate) fn new(shared: Arc<Shared>, check: F) -> Self {
        WaitUntil {
            wait: Wait::new(shared, Until(check)),
        }
    }

    /// Gives up with [`Error::TimedOut`] after `timeout`, counted from this call.
    ///
    /// The check runs first on the first poll, so a condition that already holds wins over a zero
    /// timeout. `Duration::MAX` (or anything past the clock's range) never times out.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Error, Pump};
    /// use std::time::Duration;
    ///
    /// # futures_lite::future::block_on(async {
    /// let pump = Pump::new(|| {});
    /// pump.spawn();
    /// let outcome = pump.wait_until(|| false).timeout(Duration::from_millis(20)).await;
    /// assert_eq!(outcome, Err(Error::TimedOut));
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.wait.set_timeout(timeout);
        self
    }

    /// Gives up with [`Error::TimedOut`] at `deadline`.
    pub fn deadline(mut self, deadline: Instant) -> Self {
        self.wait.set_deadline(Some(deadline));
        self
    }
}

impl<F: FnMut() -> bool> Future for WaitUntil<F> {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.wait.poll_wait(cx)
    }
}

impl<F> fmt::Debug for WaitUntil<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitUntil").finish_non_exhaustive()
    }
}

/// Future returned by [`Pump::wait_for`](crate::Pump::wait_for): resolves to the first `Some`
/// its check returns.
///
/// The check runs under the pump's loop lock, never at the same time as `run_once` or another
/// check, and is called again only after the loop has run since its last call.
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
///
/// # futures_lite::future::block_on(async {
/// // Stand-in for a C library that stores a result when a run completes a job.
/// let result = Arc::new(Mutex::new(None));
/// let slot = result.clone();
/// let pump = Pump::new(move || {
///     *slot.lock().unwrap() = Some(200_u16);
/// });
/// pump.spawn();
///
/// let status = pump
///     .wait_for(move || result.lock().unwrap().take())
///     .timeout(Duration::from_secs(2))
///     .await?;
/// assert_eq!(status, 200);
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[doc = wait_future_docs!()]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct WaitFor<F, T> {
    wait: Wait<For<F, T>>,
}

impl<F: FnMut() -> Option<T>, T> WaitFor<F, T> {
    pub(crate) fn new(shared: Arc<Shared>, check: F) -> Self {
        WaitFor {
            wait: Wait::new(shared, For(check, PhantomData)),
        }
    }

    /// Gives up with [`Error::TimedOut`] after `timeout`, counted from this call.
    ///
    /// The check runs first on the first poll, so a value that is already there wins over a zero
    /// timeout. `Duration::MAX` (or anything past the clock's range) never times out.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Error, Pump};
    /// use std::time::Duration;
    ///
    /// # futures_lite::future::block_on(async {
    /// let pump = Pump::new(|| {});
    /// pump.spawn();
    /// let outcome = pump.wait_for(|| None::<u8>).timeout(Duration::from_millis(20)).await;
    /// assert_eq!(outcome, Err(Error::TimedOut));
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.wait.set_timeout(timeout);
        self
    }

    /// Gives up with [`Error::TimedOut`] at `deadline`.
    pub fn deadline(mut self, deadline: Instant) -> Self {
        self.wait.set_deadline(Some(deadline));
        self
    }
}

impl<F: FnMut() -> Option<T>, T> Future for WaitFor<F, T> {
    type Output = Result<T, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.wait.poll_wait(cx)
    }
}

impl<F, T> fmt::Debug for WaitFor<F, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitFor").finish_non_exhaustive()
    }
}
