//! [`Builder`]: the pump's settings.

#[cfg(unix)]
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use crate::calls::Calls;
use crate::core::{Config, Core, Runner};
use crate::trigger::{Trigger, TriggerSource};
use crate::{Error, IntoNext, LoopHandle, Pump, Strategy};

/// Settings for a [`Pump`], from [`Pump::builder`].
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
/// use std::time::Duration;
///
/// let pump = Pump::builder()
///     .interval(Duration::from_millis(5))
///     .idle_stop(false) // keep servicing the loop even when nobody waits
///     .build(|| { /* ffi::run_event_loop_once() */ })?;
/// # Ok::<(), ffi_pump::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    /// `None`: not set, [`Builder::DEFAULT_INTERVAL`] for a pump that ticks; a pump whose
    /// `run_once` reports deadlines refuses a set one.
    interval: Option<Duration>,
    /// `None`: not set, [`Builder::DEFAULT_CHECK_BUDGET`]; a broadcast pump, which evaluates no
    /// checks, refuses a set one.
    check_budget: Option<Duration>,
    idle_stop: bool,
    strategy: Strategy,
    name: Option<Arc<str>>,
    /// What `run_on_readable` was given.
    trigger: Option<TriggerSource>,
    /// Whether `tokio_readiness` asked for tokio's reactor.
    #[cfg(all(unix, feature = "tokio"))]
    tokio_readiness: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            interval: None,
            check_budget: None,
            idle_stop: true,
            strategy: Strategy::default(),
            name: None,
            trigger: None,
            #[cfg(all(unix, feature = "tokio"))]
            tokio_readiness: false,
        }
    }
}

impl Builder {
    /// The timer period when none is set: 1 ms.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(1);

    /// A builder with the defaults: a 1 ms interval, idle stop on.
    pub fn new() -> Self {
        Builder::default()
    }

    /// The time the checks of pump-evaluated waits may take at a stretch when none is set:
    /// 500 µs.
    pub const DEFAULT_CHECK_BUDGET: Duration = Duration::from_micros(500);

    /// How often the pump's timer runs the loop while someone waits (default 1 ms).
    ///
    /// A zero interval is refused by [`build`](Builder::build). An interval too long for the
    /// clock (such as `Duration::MAX`) means the timer never fires: the loop then runs only for
    /// [`Pump::kick`] and [`Pump::turn`]. Ticks missed while a run took longer than the
    /// interval, or the executor stalled, are skipped, not made up back to back: the next comes
    /// one interval after that run ([`Stats::late_ticks`](crate::Stats::late_ticks)).
    ///
    /// Only pumps that tick have an interval: those whose `run_once` returns `()` or a
    /// [`Next`](crate::Next), wherever the loop lives. A pump whose `run_once` returns
    /// `Option<Instant>` (its own deadlines) refuses one with [`Error::InvalidConfig`] rather
    /// than ignore it.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Error, Pump};
    /// use std::time::Duration;
    ///
    /// let ticked = Pump::builder().interval(Duration::from_millis(5)).build(|| {});
    /// assert!(ticked.is_ok());
    /// let hinted = Pump::builder().interval(Duration::from_millis(5)).build(|| None);
    /// assert!(matches!(hinted, Err(Error::InvalidConfig(_))));
    /// ```
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = Some(interval);
        self
    }

    /// How long the checks of pump-evaluated waits may run at a stretch (default
    /// [`DEFAULT_CHECK_BUDGET`](Builder::DEFAULT_CHECK_BUDGET)).
    ///
    /// After each run the pump evaluates the registered checks under the loop lock; with many
    /// slow checks, it stops once the budget is spent, lets go of the lock (so turns, kicks and
    /// calls get their turn), and goes on with the checks not yet seen as soon as it can —
    /// without calling the C loop again. The waits that register while a pass holds the lock (a
    /// burst of them, say) are checked as it is let go, within the same budget, and the rest of
    /// them the same way; those that register during a run join its round. A run that comes
    /// before a round's checks are all done (kicks, calls, ticks faster than the checks) does not
    /// start them over: the round goes on, and the run's own round begins as soon as it ends,
    /// so every wait is checked within two rounds' worth of checks, however often the loop runs.
    /// A [`turn`](crate::Pump::turn) still returns only once its round's checks are all done. A
    /// zero budget is refused by every `build` method, as is a budget for a pump with
    /// [`Strategy::Broadcast`], where each wait checks itself and the pump evaluates no checks.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::time::Duration;
    ///
    /// // Thousands of waits whose checks each call into C: keep the lock at most 2 ms.
    /// let pump = Pump::builder()
    ///     .check_budget(Duration::from_millis(2))
    ///     .build(|| { /* ffi::run_event_loop_once() */ })?;
    /// # Ok::<(), ffi_pump::Error>(())
    /// ```
    pub fn check_budget(mut self, budget: Duration) -> Self {
        self.check_budget = Some(budget);
        self
    }

    /// Whether the pump stops its timers while no wait is pending (default `true`).
    ///
    /// Idle, the pump makes no run for a tick or for the loop's own deadline, and costs nothing;
    /// the first new wait restarts the timers, with the first tick one interval later. What the
    /// library itself asks for still runs the loop while idle: readiness of its descriptor or
    /// descriptor set (data it queued to send goes out, a peer's hang-up is seen), a
    /// [`Pump::kick`], a [`LoopHandle`](crate::LoopHandle) call, a [`Pump::turn`] — the crate
    /// docs' "Idle" section says the rule once. Turn it off for loops whose timers must fire even
    /// when nobody waits (keep-alives on a timer, a protocol's heartbeat).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::time::Duration;
    ///
    /// let pump = Pump::builder()
    ///     .interval(Duration::from_millis(50))
    ///     .idle_stop(false) // a heartbeat timer in C must fire even with nobody waiting
    ///     .build(|| { /* ffi::run_event_loop_once() */ })?;
    /// # Ok::<(), ffi_pump::Error>(())
    /// ```
    pub fn idle_stop(mut self, idle_stop: bool) -> Self {
        self.idle_stop = idle_stop;
        self
    }

    /// Who runs the checks of [`Pump::wait_until`] and [`Pump::wait_for`] after each run
    /// (default [`Strategy::PumpEvaluated`]); see [`Strategy`].
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Pump, Strategy};
    ///
    /// // A few waits whose tasks should see every round themselves:
    /// let pump = Pump::builder().strategy(Strategy::Broadcast).build(|| {})?;
    /// # Ok::<(), ffi_pump::Error>(())
    /// ```
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// A name for the pump, shown by its `Debug` output and, with the `tracing` feature, on its
    /// span (`ffi_pump::pump`, field `name`), so the rounds of several pumps can be told apart.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// let pump = Pump::builder().name("libcurl").build(|| {})?;
    /// assert!(format!("{pump:?}").contains("libcurl"));
    /// # Ok::<(), ffi_pump::Error>(())
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(Arc::from(name.into()));
        self
    }

    /// Also turns the pump as soon as `fd` becomes readable, so the loop runs within microseconds
    /// of the C library signalling work instead of at the next tick.
    ///
    /// For a library that exposes a descriptor to poll (libusb's pollfds, an eventfd it signals,
    /// `dbus_watch_get_unix_fd`). The pump keeps a duplicate of `fd` and never reads it, nor
    /// changes its flags; the C library keeps ownership of its own. Readiness is level-triggered:
    /// while the descriptor stays readable after a run, the pump runs again, so `run_once` must
    /// consume what made it readable. The interval timer keeps running as a fallback; make it
    /// long (100 ms) or `Duration::MAX` to turn only on readiness, kicks and turns.
    ///
    /// A [`Descriptors`](crate::Descriptors) set may be given to several pumps, each of which runs
    /// for what is ready. On Linux each adds a nested epoll watch of the set, and the kernel limits
    /// the wake-up paths from a watched descriptor through them: 100 pumps on one set that watches
    /// something (the 101st `build` returns [`Error::Trigger`]), and a
    /// [`watch`](crate::Descriptors::watch) that would pass the limit is refused (`InvalidInput`).
    /// A pump with [`tokio_readiness`](Builder::tokio_readiness) watches the set from tokio's
    /// reactor too once its driver runs on tokio, and counts up to twice: 50 of those fit when
    /// each driver starts before the next `build`, which is refused past that with
    /// [`Error::Trigger`]; pumps built first and started after all fit, those past the limit
    /// watching through async-io's reactor instead of tokio's (measured, Linux 6.18), as does
    /// one given a duplicate of the set's descriptor rather than the set (50).
    /// The paths are counted per watched descriptor: sets that each watch one descriptor share the
    /// limit too. A dropped pump lets go of its set's nesting as its driver ends, at the driver
    /// task's next poll: pumps made and dropped in a tight loop count until then.
    ///
    /// On Windows it takes a [`Descriptors`](crate::Descriptors) set (sockets): see
    /// [`run_on_readable`](Builder::run_on_readable) there. For a library that signals work
    /// some other way there, call [`Pump::kick`] from wherever it does (a callback, a thread
    /// waiting on its handle), or let `run_once` report its next deadline.
    ///
    /// If waiting for readiness fails, or the library closes its descriptor (noticed at the next
    /// readiness, also when a new file took its number: an eventfd made again, whose inode every
    /// eventfd shares, is told apart by the kernel on Linux), the pump stops: every wait ends
    /// with [`Error::Trigger`] instead of the pump spinning on a duplicate left readable forever.
    /// The duplicate, and for what is not a socket the kernel entry that tells such a new file,
    /// are made here: with no descriptor free for either, `build` returns [`Error::Trigger`].
    ///
    /// # Latency
    ///
    /// Right after a run the pump asks the kernel whether the descriptor is still readable, so
    /// work that keeps falling due is run without a trip through the reactor. Otherwise a
    /// readiness reaches the pump through async-io's reactor: on smol the executor's idle threads
    /// poll it themselves; on tokio it is async-io's own thread that wakes the pump task, which
    /// then waits in tokio's injection queue like any wake from outside the runtime, unless
    /// `tokio_readiness(true)` (feature `tokio`) lets tokio's own reactor watch the descriptor,
    /// which takes that hand-off away. A pump on
    /// [`Backend::Thread`](crate::Backend::Thread) turns as fast as a bare thread blocked on the
    /// descriptor, but then wakes every tokio waiter from outside the runtime instead, which
    /// costs more the more waiters a run wakes. The repository's BENCHMARKS.md measures each.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::os::unix::net::UnixStream;
    /// use std::time::Duration;
    ///
    /// // Stand-in for the C library's descriptor.
    /// let (library_side, _signal) = UnixStream::pair()?;
    /// let pump = Pump::builder()
    ///     .interval(Duration::from_millis(100)) // only a fallback now
    ///     .run_on_readable(&library_side)
    ///     .build(|| { /* ffi::run_event_loop_once() */ })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(unix)]
    #[cfg_attr(docsrs, doc(cfg(unix)))]
    pub fn run_on_readable(mut self, fd: impl AsFd) -> Self {
        self.trigger = Some(TriggerSource::new(fd));
        self
    }

    /// Also turns the pump as soon as a registration in `set` is ready (Windows: the set's
    /// sockets; on Unix this takes any descriptor, the set included).
    ///
    /// An I/O completion port cannot be watched by a reactor, so the pump keeps a thread that
    /// sleeps on the set's port and wakes the driver, wherever it runs, when the port reports a
    /// socket ready; it sleeps again once a run took the reports (`set.ready()` in `run_once`),
    /// and ends with the pump. Readiness is level-triggered, as on Unix: `run_once` hands what
    /// [`Descriptors::ready`](crate::Descriptors::ready) returns to the library, and while a
    /// report is not taken the pump runs again. A loop on its own thread needs none of this:
    /// it takes the set from [`Setup::descriptors`](crate::Setup::descriptors), and its thread
    /// sleeps on the port itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Descriptors, Interest, Pump};
    /// use std::net::{TcpListener, TcpStream};
    /// use std::os::windows::io::AsRawSocket;
    ///
    /// let listener = TcpListener::bind("127.0.0.1:0")?;
    /// let socket = TcpStream::connect(listener.local_addr()?)?;
    /// let descriptors = Descriptors::new()?;
    /// descriptors.watch(socket.as_raw_socket(), Interest::READABLE, 1)?;
    /// let set = descriptors.clone();
    /// let pump = Pump::builder()
    ///     .run_on_readable(&descriptors)
    ///     .build(move || {
    ///         for ready in set.ready() {
    ///             let _ = (ready.token(), ready.is_readable()); // hand it to the library
    ///         }
    ///         None // the library's own deadline, if it has one
    ///     })?;
    /// // The library's part: a socket leaves the set before it is closed.
    /// descriptors.unwatch(1)?;
    /// drop(socket);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(windows)]
    pub fn run_on_readable(mut self, set: &crate::Descriptors) -> Self {
        self.trigger = Some(TriggerSource::new(set));
        self
    }

    /// Watches the readiness trigger with the reactor of the tokio runtime the pump runs on,
    /// instead of async-io's (default `false`).
    ///
    /// Through async-io, a readiness on tokio takes two hand-offs before the loop runs: async-io's
    /// thread wakes, then wakes the pump task from outside the runtime. Through tokio's reactor,
    /// the worker parked on it wakes and runs the pump itself, one hand-off fewer (the
    /// repository's BENCHMARKS.md measures the difference).
    ///
    /// It applies only with [`run_on_readable`](Builder::run_on_readable), and where the pump's
    /// driver starts inside a tokio runtime's context ([`Backend::Tokio`], or [`Pump::run`]
    /// polled on tokio); a driver started outside any (on another executor, on
    /// [`Backend::Thread`](crate::Backend::Thread)) falls back to async-io's reactor. The
    /// context is what decides, not who polls: a driver polled by another executor on a thread
    /// that entered a runtime (`Runtime::enter`) watches through that runtime's reactor — it
    /// sees no readiness while nothing drives that runtime, and fails with [`Error::Trigger`]
    /// if the runtime has no I/O enabled. Settings it cannot apply are refused at build with
    /// [`Error::InvalidConfig`]: without `run_on_readable` (no descriptor to watch), and with the
    /// loop on its own thread (that thread watches through async-io). Readiness stays
    /// level-triggered: tokio's readiness is an edge it keeps until cleared, so the pump asks
    /// the kernel before trusting it.
    ///
    /// # Errors
    ///
    /// tokio's reactor is part of its I/O driver. On a runtime built without
    /// [`enable_io`](tokio::runtime::Builder::enable_io) (or `enable_all`, which
    /// `#[tokio::main]` calls) the pump stops when it starts, and every wait ends with
    /// [`Error::Trigger`] (kind `Unsupported`). tokio cannot be asked beforehand: it panics on
    /// the registration, the pump catches that, and the panic hook prints tokio's message,
    /// which says what to enable.
    ///
    /// [`Backend::Tokio`]: crate::Backend::Tokio
    /// [`Pump::run`]: crate::Pump::run
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::os::unix::net::UnixStream;
    /// use std::time::Duration;
    ///
    /// # let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    /// # rt.block_on(async {
    /// // Stand-in for the C library's descriptor.
    /// let (library_side, _signal) = UnixStream::pair()?;
    /// let pump = Pump::builder()
    ///     .interval(Duration::from_secs(1)) // a fallback only
    ///     .run_on_readable(&library_side)
    ///     .tokio_readiness(true)
    ///     .build(|| { /* ffi::run_event_loop_once() */ })?;
    /// pump.spawn(); // on this tokio runtime, which has its I/O driver
    /// pump.turn().await?;
    /// pump.close();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(all(unix, feature = "tokio"))]
    #[cfg_attr(docsrs, doc(cfg(all(unix, feature = "tokio"))))]
    pub fn tokio_readiness(mut self, tokio_readiness: bool) -> Self {
        self.tokio_readiness = tokio_readiness;
        self
    }

    /// The readiness trigger for a new pump.
    fn trigger(&self) -> Result<Option<Trigger>, Error> {
        #[cfg(all(unix, feature = "tokio"))]
        let tokio_readiness = self.tokio_readiness;
        #[cfg(not(all(unix, feature = "tokio")))]
        let tokio_readiness = false;
        self.trigger
            .as_ref()
            .map(|fd| fd.register(tokio_readiness))
            .transpose()
    }

    /// The settings of a pump whose `run_once` returns `N`, with the loop in the pump or on a
    /// thread of its own (`on_thread`). Refuses every setting that would otherwise be ignored.
    #[cfg_attr(not(all(unix, feature = "tokio")), allow(unused_variables))]
    fn config<N: IntoNext>(&self, on_thread: bool) -> Result<Config, Error> {
        let interval = match self.interval {
            Some(interval) if interval.is_zero() => {
                return Err(Error::InvalidConfig("interval must be longer than zero"))
            }
            Some(_) if !N::TICKS => {
                return Err(Error::InvalidConfig(
                    "interval: a pump whose run_once reports its deadlines has no ticks",
                ))
            }
            Some(interval) => interval,
            None => Builder::DEFAULT_INTERVAL,
        };
        let check_budget = match self.check_budget {
            Some(budget) if budget.is_zero() => {
                return Err(Error::InvalidConfig(
                    "check_budget must be longer than zero",
                ))
            }
            Some(_) if self.strategy == Strategy::Broadcast => {
                return Err(Error::InvalidConfig(
                    "check_budget: a broadcast pump evaluates no checks, each wait checks itself",
                ))
            }
            Some(budget) => budget,
            None => Builder::DEFAULT_CHECK_BUDGET,
        };
        #[cfg(all(unix, feature = "tokio"))]
        if self.tokio_readiness {
            if on_thread {
                return Err(Error::InvalidConfig(
                    "tokio_readiness: a loop on its own thread is watched by async-io, not tokio",
                ));
            }
            if self.trigger.is_none() {
                return Err(Error::InvalidConfig(
                    "tokio_readiness without run_on_readable: no descriptor to watch",
                ));
            }
        }
        Ok(Config {
            interval,
            check_budget,
            idle_stop: self.idle_stop,
            strategy: self.strategy,
            first_at_a_tick: N::FIRST_AT_A_TICK,
        })
    }

    /// Builds a pump around `run_once`, the C library's "process what is pending" call, with the
    /// loop in the pump.
    ///
    /// The pump calls it once per round, never from two threads at once and never from inside
    /// itself. No tick, deadline or kick runs it until the pump is driven: [`Pump::spawn`] or
    /// [`Pump::run`] (a [`Pump::turn`] runs it once itself).
    ///
    /// What `run_once` returns says what wakes the loop next ([`Next`](crate::Next)):
    ///
    /// - `()` — a polled library (`curl_multi_perform`, a vendor SDK's `poll()`): the pump ticks
    ///   at the [`interval`](Builder::interval) while anyone waits.
    /// - `Option<Instant>` — a library that knows its next deadline (`curl_multi_timeout`,
    ///   `uv_backend_timeout`, the timeout of `g_main_context_query`): the pump runs once as soon
    ///   as a wait is pending, to hear it, then sleeps until that moment (`None`: nothing is
    ///   due); while nothing is due it makes no runs at all. It has no ticks, so it refuses an
    ///   [`interval`](Builder::interval). Kick it after submitting work, so `run_once` can report
    ///   the new deadline.
    /// - [`Next`](crate::Next) — either, run by run.
    ///
    /// Whatever it returns, the pump also runs on [`Pump::kick`], [`Pump::turn`] and readiness
    /// ([`run_on_readable`](Builder::run_on_readable)).
    ///
    /// # Blocking
    ///
    /// `run_once` runs on the executor thread that drives the pump (or that calls
    /// [`Pump::turn`]), so it should return quickly. A loop call that blocks
    /// (`libusb_handle_events_timeout` with a timeout, a vendor SDK that sleeps) belongs on a
    /// thread of its own: build with [`build_with_state`](Builder::build_with_state), and the
    /// executor stays free while the loop blocks.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a zero interval, an interval on a `run_once` that returns
    /// deadlines, a zero [`check_budget`](Builder::check_budget), or `tokio_readiness` without
    /// `run_on_readable`. [`Error::Trigger`] if the descriptor given to
    /// [`run_on_readable`](Builder::run_on_readable) cannot be watched (a regular file, which
    /// epoll refuses; no descriptor left for the pump's duplicate); no pump is made.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Error, Pump};
    /// use std::time::{Duration, Instant};
    ///
    /// # futures_lite::future::block_on(async {
    /// // Polled: ticks.
    /// let zero = Pump::builder().interval(Duration::ZERO).build(|| {});
    /// assert!(matches!(zero, Err(Error::InvalidConfig(_))));
    ///
    /// // Its own deadlines: no ticks.
    /// let due = Instant::now() + Duration::from_millis(20);
    /// let pump = Pump::builder().build(move || {
    ///     // ffi::run_event_loop_once(); then, e.g., curl_multi_timeout():
    ///     (Instant::now() < due).then_some(due)
    /// })?;
    /// pump.spawn();
    /// pump.wait_until(move || Instant::now() >= due).await?;
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn build<F, N>(self, run_once: F) -> Result<Pump, Error>
    where
        F: FnMut() -> N + Send + 'static,
        N: IntoNext,
    {
        let mut run_once = run_once;
        let core = Core::new(
            self.config::<N>(false)?,
            self.name.clone(),
            Runner::here(move || run_once().into_next()),
            self.trigger()?,
        );
        Ok(Pump::from_core(core))
    }

    /// Builds a pump whose loop lives on a thread of its own, started now, with its state: the
    /// pump, and a [`LoopHandle`] to reach that state from anywhere. Needs no runtime.
    ///
    /// `factory` runs on the thread and makes the loop's state `S` (a curl multi handle, a Tcl
    /// interpreter, a GLib `MainContext` acquired there, a D-Bus connection), which never leaves
    /// it, so it need not be `Send`. It is handed the [`Setup`](crate::Setup): the pump's
    /// descriptor set, made on demand, and a [`Kicker`](crate::Kicker) for the state to keep.
    /// It may fail: its error comes back from here as [`Error::Factory`] (and a panic in it as
    /// [`Error::Panicked`]), and no pump is made. This returns once the factory did.
    ///
    /// Only that thread calls `run_once(&mut state, &run)`, and the closures sent with
    /// [`LoopHandle::call`] and its kin, which run between two runs, never during one, and kick
    /// the pump. [`Run`](crate::Run) says why this run happens, whether the deadline `run_once`
    /// reported came, and which descriptors of the set are ready.
    ///
    /// What `run_once` returns says what wakes the loop next, as for [`build`](Builder::build):
    /// `()` ticks at the [`interval`](Builder::interval) while anyone waits, `Option<Instant>`
    /// sleeps until that deadline (`None`: nothing is due) and refuses an interval, a
    /// [`Next`](crate::Next) says either, run by run. The thread sleeps until then, or until a
    /// kick, a call, a [`turn`](Pump::turn) or readiness of the set (or of the descriptor given to
    /// [`run_on_readable`](Builder::run_on_readable)). Without ticks it runs once as soon as a
    /// wait is pending, to hear the first deadline.
    ///
    /// When the pump closes, the thread refuses further calls (the queued ones are dropped unrun
    /// and their callers get [`Error::Closed`]), runs the cancels of the waits the close ended
    /// ([`WaitKey::on_cancel`](crate::WaitKey::on_cancel)) with the state, drops the state and
    /// ends; [`Pump::closed`] waits for that.
    ///
    /// # Errors
    ///
    /// [`Error::Factory`] with the factory's error, [`Error::Panicked`] if it panicked,
    /// [`Error::InvalidConfig`] for the settings it cannot apply (an interval on a `run_once`
    /// that returns deadlines, `tokio_readiness`), [`Error::ThreadSpawn`] if the thread cannot be
    /// started, [`Error::Trigger`] if the descriptor set cannot be watched.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Completions, Error, Pump};
    /// use std::collections::BTreeMap;
    /// use std::time::{Duration, Instant};
    ///
    /// // Stand-in for a thread-affine C library with timers: what is due when.
    /// struct Timers {
    ///     due: BTreeMap<Instant, u32>,
    ///     fired: Completions<u32, ()>,
    /// }
    ///
    /// # futures_lite::future::block_on(async {
    /// let fired = Completions::new();
    /// let table = fired.clone();
    /// let (pump, timers) = Pump::builder().build_with_state(
    ///     move |_setup| Ok(Timers { due: BTreeMap::new(), fired: table }),
    ///     |timers, _run| {
    ///         // run_once: fire what is due, then say when the next one is.
    ///         let now = Instant::now();
    ///         while let Some(entry) = timers.due.first_entry().filter(|e| *e.key() <= now) {
    ///             let id = entry.remove();
    ///             timers.fired.complete(id, ());
    ///         }
    ///         timers.due.keys().next().copied()
    ///     },
    /// )?;
    /// let at = Instant::now() + Duration::from_millis(20);
    /// timers.post(move |timers| {
    ///     timers.due.insert(at, 7);
    /// })?;
    /// pump.wait_key(&fired, 7).timeout(Duration::from_secs(2)).await?;
    /// assert!(Instant::now() >= at);
    ///
    /// // A factory that fails: its error comes back, no pump is made.
    /// let failed = Pump::builder().build_with_state(
    ///     |_setup| -> Result<(), _> { Err("no such device".into()) },
    ///     |_state, _run| None,
    /// );
    /// let Err(Error::Factory(why)) = failed else { panic!("the factory failed") };
    /// assert_eq!(why.to_string(), "no such device");
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn build_with_state<S, F, R, N>(
        self,
        factory: F,
        run_once: R,
    ) -> Result<(Pump, LoopHandle<S>), Error>
    where
        S: 'static,
        F: FnOnce(&mut crate::Setup) -> Result<S, crate::FactoryError> + Send + 'static,
        R: FnMut(&mut S, &crate::Run<'_>) -> N + Send + 'static,
        N: IntoNext,
    {
        let core = Core::new(
            self.config::<N>(true)?,
            self.name.clone(),
            Runner::OnPumpThread,
            self.trigger()?,
        );
        core.span.driven_by(crate::driver::LOOP_THREAD);
        let calls = Arc::new(Calls::default());
        let handle = LoopHandle::new(core.clone(), calls.clone());
        let pump = Pump::from_core(core.clone());
        crate::driver::spawn_loop_thread(core, calls, factory, run_once)?;
        Ok((pump, handle))
    }
}
