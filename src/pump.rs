//! [`Pump`]: the handle users share between tasks.

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use crate::backend;
use crate::core::Core;
#[cfg(doc)]
use crate::Strategy;
use crate::{
    Backend, Builder, Closed, Completions, Driver, Error, Kicker, Stats, Turn, WaitFor, WaitKey,
    WaitUntil,
};

/// A shared driver for a C library's non-reentrant event loop.
///
/// The pump calls `run_once` once per round — on its timer, on [`kick`](Pump::kick), or on a
/// [`turn`](Pump::turn) — never from two threads at once and never from inside itself, and after
/// each round wakes the waits it concerns: by default it runs their checks itself and wakes
/// those whose condition holds ([`Strategy::PumpEvaluated`](crate::Strategy::PumpEvaluated));
/// with [`Strategy::Broadcast`](crate::Strategy::Broadcast) it wakes every wait to check its
/// status. Checks run under the same lock as `run_once`, so they never overlap a run either.
///
/// `Pump` is a cheap handle: clone it into every task (it is `Clone + Send + Sync`). When the last
/// handle is dropped the pump closes, as if [`close`](Pump::close) had been called.
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # futures_lite::future::block_on(async {
/// // Stand-in for `ffi::run_event_loop_once()` and `ffi::check_status_for_id(id)`.
/// let runs = Arc::new(AtomicU64::new(0));
/// let counter = runs.clone();
/// let pump = Pump::new(move || {
///     counter.fetch_add(1, Ordering::SeqCst);
/// });
/// pump.spawn();
///
/// let tasks: Vec<_> = (1..=3)
///     .map(|id| {
///         let pump = pump.clone();
///         let runs = runs.clone();
///         smol::spawn(async move {
///             pump.wait_until(move || runs.load(Ordering::SeqCst) >= id)
///                 .timeout(Duration::from_secs(2))
///                 .await
///         })
///     })
///     .collect();
/// for task in tasks {
///     task.await?;
/// }
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct Pump {
    handle: Arc<Handle>,
}

/// Closes the pump when the last [`Pump`] clone goes.
struct Handle {
    core: Arc<Core>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.core.close();
    }
}

impl Pump {
    /// A pump around `run_once` with the default settings (1 ms interval, idle stop on).
    ///
    /// Short for `Pump::builder().build(run_once)`, which cannot fail with the defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// let pump = Pump::new(|| { /* ffi::run_event_loop_once() */ });
    /// pump.spawn();
    /// ```
    pub fn new<F>(run_once: F) -> Pump
    where
        F: FnMut() + Send + 'static,
    {
        match Builder::new().build(run_once) {
            Ok(pump) => pump,
            Err(err) => unreachable!("the default settings are valid: {err}"),
        }
    }

    /// A [`Builder`] to set the interval and idle behaviour, or to keep the loop on its own thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::time::Duration;
    ///
    /// let pump = Pump::builder()
    ///     .interval(Duration::from_millis(10))
    ///     .build(|| {})?;
    /// # Ok::<(), ffi_pump::Error>(())
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    pub(crate) fn from_core(core: Arc<Core>) -> Pump {
        Pump {
            handle: Arc::new(Handle { core }),
        }
    }

    fn core(&self) -> &Arc<Core> {
        &self.handle.core
    }

    /// Spawns the pump future as a detached task on the backend [`Backend::detect`] picks, and
    /// says which one it used.
    ///
    /// The pump is counted as driven as soon as this returns, so waits may start at once.
    /// Spawning twice is harmless: the second driver stands by. Where the system refuses the
    /// thread the backend needs, the pump closes (unless another driver drives it); where
    /// async-io's reactor cannot start (out of descriptors at its first use), it fails with
    /// [`Error::ReactorUnavailable`]: its waits end with that — [`spawn_on`](Pump::spawn_on)
    /// says both as errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Backend, Pump};
    ///
    /// let pump = Pump::new(|| {});
    /// let backend = pump.spawn();
    /// # #[cfg(feature = "smol")]
    /// assert_eq!(backend, Backend::Smol); // default features, outside tokio
    /// ```
    pub fn spawn(&self) -> Backend {
        // Available by `detect`'s rule, asked once (for tokio that spawns a no-op task).
        let backend = Backend::detect();
        match self.spawn_available(backend) {
            // Nothing can drive the pump: its waits end with why, rather than never.
            Err(Error::ReactorUnavailable) => self.core().fail(Error::ReactorUnavailable),
            // A thread refused (the thread backend's, or a runtime's first) has closed the pump
            // as its driver went, unless another driver drives it.
            Err(err) => debug_assert!(matches!(err, Error::ThreadSpawn(_)), "{err}"),
            Ok(()) => {}
        }
        backend
    }

    /// Spawns the pump future as a detached task on `backend`.
    ///
    /// # Errors
    ///
    /// [`Error::BackendUnavailable`] if `backend` is not compiled in or (tokio) there is no current
    /// runtime, or it is shut down; nothing is spawned then (see [`Backend::is_available`]).
    /// [`Error::ThreadSpawn`] if [`Backend::Thread`] cannot start its thread, or smol or
    /// async-std cannot start their executor's threads at their first spawn; the pump is closed
    /// then, unless another driver drives it (smol tries again at its next spawn; async-std keeps
    /// its first failure, and every later spawn on it in the process says `ThreadSpawn` too).
    /// [`Error::ReactorUnavailable`] if async-io's reactor cannot start (its first use in the
    /// process, with no descriptor free); nothing is spawned then, and the pump stays as it was.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Backend, Error, Pump};
    ///
    /// let pump = Pump::new(|| {});
    /// assert_eq!(
    ///     pump.spawn_on(Backend::Tokio), // not inside a tokio runtime
    ///     Err(Error::BackendUnavailable(Backend::Tokio)),
    /// );
    /// pump.spawn_on(Backend::Thread)?;
    /// # Ok::<(), Error>(())
    /// ```
    pub fn spawn_on(&self, backend: Backend) -> Result<(), Error> {
        if !backend.is_available() {
            return Err(Error::BackendUnavailable(backend));
        }
        self.spawn_available(backend)
    }

    /// Spawns the pump future on `backend`, which the caller found available.
    fn spawn_available(&self, backend: Backend) -> Result<(), Error> {
        // Before the driver is made: refused, the pump stays as it was.
        crate::reactor::available()?;
        self.core().span.driven_by(backend.label());
        backend::spawn(backend, self.run())
    }

    /// The pump future, to spawn on any executor yourself; see [`Driver`]. It counts as a
    /// driver from this call, not from its first poll (waits made meanwhile wait for it, they
    /// do not end with [`Error::NotRunning`]), and dropping it, polled or not, is a driver
    /// leaving: the last one closes the pump.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), ffi_pump::Error> {
    /// let pump = Pump::new(|| {});
    /// tokio::spawn(pump.run());
    /// pump.turn().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn run(&self) -> Driver {
        Driver::new(self.core().clone())
    }

    /// Runs the loop once now, or joins a run that started after this call; returns once that
    /// run and the checks of the pump-evaluated waits after it have finished.
    ///
    /// Whoever gets the loop lock first runs the loop; everybody else who calls `turn` meanwhile
    /// shares that run instead of running it again. A run already in progress when `turn` is
    /// called does not count (it may have passed the point where it would see work the caller
    /// just submitted to the C side): `turn` waits for it to end and then runs, or joins, the
    /// next. So after `turn().await` returns `Ok`, the loop has run at least once entirely after
    /// the call, and every wait ([`wait_until`](Pump::wait_until),
    /// [`wait_for`](Pump::wait_for)) whose condition held when it ended has been woken — even
    /// when its checks overran the [check budget](crate::Builder::check_budget): the turn goes on
    /// with them itself, letting go of the lock between passes. On a pump built with
    /// [`Builder::build_with_state`], the loop's thread runs the loop and this waits for that run.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] or [`Error::Panicked`] once the pump stopped (also if `run_once` panicked
    /// in this very run); [`Error::NotRunning`] if the run has to come from a driver and there is
    /// none; [`Error::Reentrant`] when called from inside `run_once` or a check.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the pump as it was, or with a run requested as by `kick`.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// # futures_lite::future::block_on(async {
    /// let pump = Pump::new(|| {});
    /// pump.spawn();
    /// pump.turn().await?;
    /// assert!(pump.stats().rounds >= 1);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn turn(&self) -> Turn {
        Turn::new(self.core().clone())
    }

    /// Waits until `check` returns `true`, calling it after each run of the loop.
    ///
    /// `check` is the C library's status call (`check_status_for_id(id)`). It runs first at the
    /// first poll (a condition that already holds is the fast path), then after each round, each
    /// time under the loop lock. With the default [`Strategy::PumpEvaluated`] the pump runs it, on
    /// the pump's thread, which is why it must be `Send + 'static`; use
    /// [`wait_until_local`](Pump::wait_until_local) for a check that cannot move. Add
    /// `.timeout(..)` to bound the wait; see [`WaitUntil`].
    ///
    /// A condition that holds at the first poll allocates nothing (with the default strategy: a
    /// [`Strategy::Broadcast`] wait, as `wait_until_local`'s, listens for the next run before it
    /// looks, and its listener is allocated). A wait that has to wait
    /// allocates one small state it shares with the pump, through which it is completed, polls
    /// and gives up without any lock the pump's pass over the checks holds: a poll never waits
    /// for a pass, and a drop at most for the block of 64 checks its own is in, whatever the
    /// number of waits. Freeing that state is the pump's main cost beyond a `HashMap` of wakers
    /// under a mutex (about 5 % of the process at 100 000 waits; BENCHMARKS.md measures it, and
    /// what it buys).
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`], [`Error::Closed`], [`Error::Panicked`], [`Error::NotRunning`] (nothing
    /// drives the pump: no `spawn`, no `run` — told at the first poll, before the check runs,
    /// so a pump left undriven is found at once, also by a condition that already holds),
    /// [`Error::Reentrant`].
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::time::Duration;
    ///
    /// # futures_lite::future::block_on(async {
    /// let pump = Pump::new(|| {});
    /// pump.spawn();
    /// let id = 7;
    /// pump.wait_until(move || id == 7 /* ffi::check_status_for_id(id) */)
    ///     .timeout(Duration::from_secs(2))
    ///     .await?;
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn wait_until<F>(&self, check: F) -> WaitUntil<F>
    where
        F: FnMut() -> bool + Send + 'static,
    {
        WaitUntil::new(self.core().clone(), check)
    }

    /// Like [`wait_until`](Pump::wait_until) for a check that is not `Send` or borrows: the
    /// waiting task runs it itself after each run ([`Strategy::Broadcast`], whatever the pump's
    /// strategy).
    ///
    /// # Errors
    ///
    /// As for [`wait_until`](Pump::wait_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::cell::Cell;
    /// use std::rc::Rc;
    ///
    /// # futures_lite::future::block_on(async {
    /// let pump = Pump::new(|| {});
    /// pump.spawn();
    /// let done = Rc::new(Cell::new(true)); // `Rc` is not `Send`
    /// pump.wait_until_local(|| done.get()).await?;
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn wait_until_local<F>(&self, check: F) -> WaitUntil<F>
    where
        F: FnMut() -> bool,
    {
        WaitUntil::local(self.core().clone(), check)
    }

    /// Waits until `check` returns `Some(value)`, calling it after each run, and yields the value.
    ///
    /// Like [`wait_until`](Pump::wait_until), for status calls that carry a result (an HTTP
    /// status, a byte count, an error code). See [`WaitFor`].
    ///
    /// # Errors
    ///
    /// As for [`wait_until`](Pump::wait_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::time::Duration;
    ///
    /// # futures_lite::future::block_on(async {
    /// let pump = Pump::new(|| {});
    /// pump.spawn();
    /// let bytes = pump.wait_for(|| Some(512_usize)).timeout(Duration::from_secs(2)).await?;
    /// assert_eq!(bytes, 512);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn wait_for<F, T>(&self, check: F) -> WaitFor<F, T>
    where
        F: FnMut() -> Option<T> + Send + 'static,
        T: Send + 'static,
    {
        WaitFor::new(self.core().clone(), check)
    }

    /// Like [`wait_for`](Pump::wait_for) for a check that is not `Send` or borrows: the waiting
    /// task runs it itself after each run ([`Strategy::Broadcast`], whatever the pump's strategy).
    ///
    /// # Errors
    ///
    /// As for [`wait_until`](Pump::wait_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::cell::RefCell;
    ///
    /// # futures_lite::future::block_on(async {
    /// let pump = Pump::new(|| {});
    /// pump.spawn();
    /// let results = RefCell::new(vec![404_u16]);
    /// assert_eq!(pump.wait_for_local(|| results.borrow_mut().pop()).await?, 404);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn wait_for_local<F, T>(&self, check: F) -> WaitFor<F, T>
    where
        F: FnMut() -> Option<T>,
    {
        WaitFor::local(self.core().clone(), check)
    }

    /// Waits until `run_once` completes `key` in `table`, and yields the value it completed it with.
    ///
    /// The completion-driven wait: no check runs per round; [`Completions::complete`] wakes this
    /// wait directly. A value completed before the wait started is taken at once (on a pump
    /// that is driven: on one nobody drives, every new wait ends with [`Error::NotRunning`]
    /// first, and the value stays in the table).
    ///
    /// # Errors
    ///
    /// [`Error::KeyInUse`] if another wait is waiting for `key`; otherwise as for
    /// [`wait_until`](Pump::wait_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Completions, Pump};
    /// use std::time::Duration;
    ///
    /// # futures_lite::future::block_on(async {
    /// let table = Completions::new();
    /// let reporter = table.clone();
    /// let pump = Pump::new(move || {
    ///     reporter.complete(42_u64, "transfer done");
    /// });
    /// pump.spawn();
    /// let outcome = pump.wait_key(&table, 42).timeout(Duration::from_secs(2)).await?;
    /// assert_eq!(outcome, "transfer done");
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn wait_key<K, V>(&self, table: &Completions<K, V>, key: K) -> WaitKey<K, V>
    where
        K: Eq + Hash + Clone + Send + 'static,
        V: Send + 'static,
    {
        WaitKey::new(self.core().clone(), table, key)
    }

    /// Asks for a run as soon as possible, without waiting for it; never blocks.
    ///
    /// Call it right after submitting work to the C side, so the work starts now rather than at
    /// the next tick. Kicks are not lost: a kick while a run is in progress causes one more run
    /// after it, and a burst of kicks causes one run. It also wakes an idle pump. Does nothing on
    /// a closed pump.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::time::Duration;
    ///
    /// # futures_lite::future::block_on(async {
    /// let pump = Pump::builder().interval(Duration::from_secs(3600)).build(|| {})?;
    /// pump.spawn();
    /// pump.kick(); // runs now, not in an hour
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn kick(&self) {
        self.core().kick();
    }

    /// A [`Kicker`]: kicks this pump without keeping it alive, for the loop's state or a C
    /// callback to hold.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// let pump = Pump::new(|| {});
    /// let kicker = pump.kicker(); // e.g. moved into a C callback's user data
    /// assert!(kicker.kick());
    /// ```
    pub fn kicker(&self) -> Kicker {
        Kicker::new(self.core())
    }

    /// Closes the pump: the loop is not called again, and every pending and later wait ends with
    /// [`Error::Closed`]. Returns `true` if this call closed it, `false` if it was closed already.
    ///
    /// It returns at once, also while a run or a pass over the checks is in progress, and never
    /// waits for a check: that run (or pass) finishes first, then the pump future ([`Driver`])
    /// completes. Pending waits end at once — while a pass over the checks is under way, the
    /// pump-evaluated ones as that pass ends, each with what its check found in it if it found
    /// anything (or a timeout that passed meanwhile), else `Closed`; on a loop with its own thread,
    /// calls queued behind the run are dropped (their callers told `Closed`) when it returns — but
    /// for the one that thread has just taken from the queue, which may still start as `close`
    /// returns (`close` does not wait for that thread; a `submit`'s `start` that does is cancelled
    /// as if it came just before). [`closed`](Pump::closed) completes once all that is over: the
    /// loop (or its state) dropped, and what the checks captured. Dropping the last `Pump` closes
    /// the same way.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Error, Pump};
    ///
    /// # futures_lite::future::block_on(async {
    /// let pump = Pump::new(|| {});
    /// pump.spawn();
    /// assert!(pump.close());
    /// assert!(pump.is_closed());
    /// assert_eq!(pump.wait_until(|| true).await, Err(Error::Closed));
    /// # });
    /// ```
    pub fn close(&self) -> bool {
        self.core().close()
    }

    /// Waits until the pump is closed and its loop is gone: no run in progress, and the loop
    /// dropped — its `run_once` closure, or, on a pump thread, the state the thread made, dropped
    /// on that thread, which then ends — and what the pump-evaluated checks of its waits
    /// captured dropped too. For a program that must free C resources in order
    /// (unload a plugin, then its library). It does not close the pump itself; see [`Closed`].
    ///
    /// # Errors
    ///
    /// [`Error::Reentrant`] when awaited from inside the pump (its `run_once`, a check, a call
    /// on its loop's thread, the `Drop` of the loop's state, of `run_once` or of what a check
    /// captured as the close drops it), where it would wait for itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    ///
    /// struct Library(Arc<AtomicBool>);
    /// impl Drop for Library {
    ///     fn drop(&mut self) {
    ///         self.0.store(true, Ordering::SeqCst); // ffi::library_free()
    ///     }
    /// }
    ///
    /// # futures_lite::future::block_on(async {
    /// let freed = Arc::new(AtomicBool::new(false));
    /// let flag = freed.clone();
    /// let (pump, _handle) = Pump::builder().build_with_state(move |_| Ok(Library(flag)), |_, _| None)?;
    /// pump.close();
    /// pump.closed().await?;
    /// assert!(freed.load(Ordering::SeqCst)); // dropped on the pump thread, which has ended
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn closed(&self) -> Closed {
        Closed::new(self.core().clone())
    }

    /// Whether the pump is closed (by [`close`](Pump::close), by its driver being dropped, or by a
    /// panic in `run_once`).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// let pump = Pump::new(|| {});
    /// assert!(!pump.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.core().is_closed()
    }

    /// A snapshot of the pump's counters; see [`Stats`].
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// let pump = Pump::new(|| {});
    /// assert_eq!(pump.stats().rounds, 0);
    /// ```
    pub fn stats(&self) -> Stats {
        self.core().stats()
    }
}

impl fmt::Debug for Pump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pump")
            .field("name", &self.core().name)
            .field("config", &self.core().config)
            .field("stats", &self.stats())
            .finish()
    }
}
