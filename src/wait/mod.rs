//! The wait futures — [`WaitUntil`], [`WaitFor`], [`WaitKey`] — on one skeleton: a protocol
//! ([`Broadcast`], [`OnPump`], or a key in a completion table) that counts itself pending in
//! the pump's demand while it waits (a [`Pending`]; [`OnPump`], which holds the core already,
//! by hand), inside one [`Timeout`].

/// The `timeout` and `deadline` methods of a wait future, with its own sentence on what wins
/// over a zero timeout and its own example.
macro_rules! timeout_methods {
    ($wins:literal, $example:literal) => {
        /// Gives up with [`Error::TimedOut`](crate::Error::TimedOut) after `timeout`, counted
        /// from this call.
        ///
        #[doc = $wins]
        /// `Duration::MAX` (or anything past the clock's range) never times out.
        ///
        /// # Examples
        ///
        /// ```
        #[doc = $example]
        /// ```
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.wait.set_timeout(timeout);
            self
        }

        /// Gives up with [`Error::TimedOut`](crate::Error::TimedOut) at `deadline`; a deadline
        /// in the past gives up at the first poll, unless the wait is already done.
        pub fn deadline(mut self, deadline: std::time::Instant) -> Self {
            self.wait.set_deadline(Some(deadline));
            self
        }
    };
}

mod broadcast;
mod key;
mod on_pump;
mod pending;
mod timeout;

pub use key::WaitKey;
pub(crate) use pending::Pending;
pub(crate) use timeout::{Timeout, Wait};

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::core::Core;
use crate::{Error, Strategy};
use broadcast::Broadcast;
use on_pump::OnPump;

/// A status check run by a wait, always under the loop lock (never while the loop runs).
///
/// This is the seam between the public wait futures and the protocols that decide who runs the
/// check and when: [`Broadcast`] (every wait checks itself after every run) and [`OnPump`] (the
/// pump checks every registered wait after each run and wakes only those that succeeded).
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

/// A wait on a check, with the protocol the pump's [`Strategy`] (or the `_local` form) picks.
enum Protocol<C, T> {
    Broadcast(Broadcast<C>),
    OnPump(OnPump<C, T>),
}

impl<C: Check<Output = T>, T> Protocol<C, T> {
    /// A wait with the pump's [`Strategy`].
    fn with_strategy(core: Arc<Core>, check: C) -> Self
    where
        C: Send + 'static,
        T: Send + 'static,
    {
        match core.config.strategy {
            Strategy::PumpEvaluated => Protocol::OnPump(OnPump::new(core, check)),
            Strategy::Broadcast => Protocol::Broadcast(Broadcast::new(core, check)),
        }
    }
}

impl<C: Check<Output = T>, T> Wait for Protocol<C, T> {
    type Output = T;

    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, Error>> {
        match self {
            Protocol::Broadcast(wait) => wait.poll_wait(cx),
            Protocol::OnPump(wait) => wait.poll_wait(cx),
        }
    }

    fn cancel(&mut self) -> Option<Result<T, Error>> {
        match self {
            Protocol::Broadcast(wait) => wait.cancel(),
            Protocol::OnPump(wait) => wait.cancel(),
        }
    }

    fn pump_id(&self) -> usize {
        match self {
            Protocol::Broadcast(wait) => wait.pump_id(),
            Protocol::OnPump(wait) => wait.pump_id(),
        }
    }
}

macro_rules! wait_future_docs {
    () => {
        "\n\n# Cancel safety\n\n\
        Dropping the future at any point (a `select`, an outer timeout, an aborted task) removes \
        it from the pump: it stops counting as pending, its check leaves the pump's registry \
        (pump-evaluated) or it gives up its place in the loop lock's queue and its listener \
        leaves without swallowing the notification of any other wait (broadcast). Nothing is \
        left to clean up, and the condition can simply be awaited again. Once the drop has \
        returned, the check is never called again, so what it looks at may be freed; with the \
        pump-evaluated strategy the drop may wait for the pump to finish the few checks it is \
        running (at most 64). A timeout that passes while the pump's check of this wait finds its \
        condition met hands over what the check found, not `TimedOut`: it waits for the pass \
        under way (one pass, bounded by the pump's check budget) so that nothing a check handed \
        out is lost. So a thread must not drop a wait, or poll one past its deadline, while it \
        holds a lock that a check of the pump takes: it would wait for that check, and the check \
        for the lock; nor may a check drop a wait of another pump whose checks drop waits of \
        this one (each pump's check would wait for the other's). A wait polled from inside a \
        check of its own pump (a check that polls another wait) cannot wait for the pass it is \
        part of: it ends with `Error::Reentrant`, and a value its own check found earlier in \
        that pass may go with it.\n\n\
        # Panics\n\n\
        Panics if polled again after it completed, like most futures. A panic in the check \
        itself propagates to the task that awaits this future (with the pump-evaluated \
        strategy it is caught on the pump and resumed there); the loop lock is released and the \
        pump keeps running.\n"
    };
}

/// Future returned by [`Pump::wait_until`](crate::Pump::wait_until) and
/// [`Pump::wait_until_local`](crate::Pump::wait_until_local): resolves once its check returns
/// `true`.
///
/// The check runs under the pump's loop lock, never at the same time as `run_once` or another
/// check: once at the first poll if the lock is free, then once after each run of the loop —
/// by the pump itself ([`Strategy::PumpEvaluated`]) or by this future's task
/// ([`Strategy::Broadcast`], and always for `wait_until_local`).
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
    wait: Timeout<Protocol<Until<F>, ()>>,
}

impl<F: FnMut() -> bool> WaitUntil<F> {
    pub(crate) fn new(core: Arc<Core>, check: F) -> Self
    where
        F: Send + 'static,
    {
        WaitUntil {
            wait: Timeout::new(Protocol::with_strategy(core, Until(check))),
        }
    }

    pub(crate) fn local(core: Arc<Core>, check: F) -> Self {
        WaitUntil {
            wait: Timeout::new(Protocol::Broadcast(Broadcast::new(core, Until(check)))),
        }
    }

    timeout_methods! {
        "The check runs first on the first poll if the loop is not running (on a driven pump: see `Error::NotRunning`), so a condition that already holds wins over a zero timeout then; during a run the check waits for it (checks never overlap runs), and a zero timeout, or a deadline that passed, gives up first.",
        "
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
"
    }
}

impl<F: FnMut() -> bool> Future for WaitUntil<F> {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.wait.poll(cx)
    }
}

impl<F> fmt::Debug for WaitUntil<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitUntil").finish_non_exhaustive()
    }
}

/// Future returned by [`Pump::wait_for`](crate::Pump::wait_for) and
/// [`Pump::wait_for_local`](crate::Pump::wait_for_local): resolves to the first `Some` its check
/// returns.
///
/// The check runs under the pump's loop lock, never at the same time as `run_once` or another
/// check: once at the first poll if the lock is free, then once after each run of the loop —
/// by the pump itself ([`Strategy::PumpEvaluated`]) or by this future's task
/// ([`Strategy::Broadcast`], and always for `wait_for_local`).
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
    wait: Timeout<Protocol<For<F, T>, T>>,
}

impl<F: FnMut() -> Option<T>, T> WaitFor<F, T> {
    pub(crate) fn new(core: Arc<Core>, check: F) -> Self
    where
        F: Send + 'static,
        T: Send + 'static,
    {
        WaitFor {
            wait: Timeout::new(Protocol::with_strategy(core, For(check, PhantomData))),
        }
    }

    pub(crate) fn local(core: Arc<Core>, check: F) -> Self {
        WaitFor {
            wait: Timeout::new(Protocol::Broadcast(Broadcast::new(
                core,
                For(check, PhantomData),
            ))),
        }
    }

    timeout_methods! {
        "The check runs first on the first poll if the loop is not running, so a value that is already there wins over a zero timeout then; during a run the check waits for it (checks never overlap runs), and a zero timeout, or a deadline that passed, gives up first.",
        "
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
"
    }
}

impl<F: FnMut() -> Option<T>, T> Future for WaitFor<F, T> {
    type Output = Result<T, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.wait.poll(cx)
    }
}

impl<F, T> fmt::Debug for WaitFor<F, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitFor").finish_non_exhaustive()
    }
}
