//! [`Timeouts`]: the timeouts a C library asks its host for, kept by the pump.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::sync::{lock, Mutex};
use crate::Kicker;

/// The timeouts a C library asks its host for — D-Bus's `add_timeout`, Avahi's `timeout_new`,
/// c-ares' and libcurl's timers — each under a token the binding chooses, from
/// [`Setup::timeouts`](crate::Setup::timeouts): the loop runs when the first one falls due, and
/// [`Run::expired`](crate::Run::expired) hands the tokens whose time came, each once. No ordered
/// set, no earliest deadline to recompute in the binding.
///
/// A handle, as [`Descriptors`](crate::Descriptors) is: `Clone`, `Send + Sync`, every method
/// takes `&self`, so the library's timeout callbacks keep a clone. A timeout set during a run
/// (in `run_once`, a call, a request's `start`) counts as the run ends; one set anywhere else
/// (another thread, a check the pump runs after the run) that falls due before every other one
/// kicks the pump, so the loop's thread wakes for it.
///
/// A timeout is one-shot: handed once, it is gone, and a repeating one (D-Bus's) is set again by
/// the library. One removed, or set again, while a run hands what fell due is not handed
/// ([`Run::expired`](crate::Run::expired) takes each out as it hands it). Take every one a run
/// hands: those left are handed at the next run, but bring none (a loop that never took them would
/// otherwise run again and again), and stay counted until then. Like the deadline `run_once`
/// returns, a timeout wakes the loop only while a task waits on the pump, unless it was built with
/// [`idle_stop(false)`](crate::Builder::idle_stop) — which a library whose timeouts are its
/// protocol's (retransmissions, keep-alives) needs; the next run after hands what fell due
/// meanwhile. A loop that ticks ([`Next::Tick`](crate::Next::Tick)) looks at its timeouts at its
/// ticks.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Pump, Timeouts};
/// use std::time::{Duration, Instant};
///
/// # futures_lite::future::block_on(async {
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let fired = Arc::new(AtomicBool::new(false));
/// let told = fired.clone();
/// let (pump, _library) = Pump::builder().build_with_state(
///     |setup| {
///         let timeouts: Timeouts = setup.timeouts(); // what `timeout_new` would hold
///         timeouts.set(7, Instant::now() + Duration::from_millis(20));
///         Ok(timeouts)
///     },
///     move |_timeouts, run| {
///         for token in run.expired() {
///             if token == 7 {
///                 told.store(true, Ordering::SeqCst); // ffi::timeout_handle(timeout 7)
///             }
///         }
///         None // no deadline of its own: the timeouts are the loop's
///     },
/// )?;
/// // A task waits (the idle rule), and the timeout wakes the loop at its time.
/// pump.wait_until(move || fired.load(Ordering::SeqCst))
///     .timeout(Duration::from_secs(5))
///     .await?;
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct Timeouts {
    inner: Arc<Inner>,
}

struct Inner {
    table: Mutex<Table>,
    kicker: Kicker,
    /// The loop's thread is in a run (its calls, `run_once`): a timeout set meanwhile counts
    /// as the run ends, with no kick.
    in_run: AtomicBool,
}

#[derive(Default)]
struct Table {
    by_token: HashMap<u64, Instant>,
    in_order: BTreeSet<(Instant, u64)>,
    /// Due at a run's start, and not handed yet: [`Run::expired`](crate::Run::expired) takes
    /// them one by one, so one removed or set again meanwhile is not handed.
    handing: VecDeque<(Instant, u64)>,
}

impl Timeouts {
    pub(crate) fn new(kicker: Kicker) -> Timeouts {
        Timeouts {
            inner: Arc::new(Inner {
                table: Mutex::new(Table::default()),
                kicker,
                in_run: AtomicBool::new(false),
            }),
        }
    }

    /// Sets timeout `token` to fall due at `at`: adds it, or moves it if it is set (D-Bus's
    /// `toggle_timeout`, Avahi's `timeout_update`). An instant already passed is handed at the
    /// next run.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::time::{Duration, Instant};
    ///
    /// # futures_lite::future::block_on(async {
    /// let (_pump, library) = Pump::builder()
    ///     .build_with_state(|setup| Ok(setup.timeouts()), |_, _| None)?;
    /// let later = Instant::now() + Duration::from_secs(60);
    /// let first = library
    ///     .call(move |timeouts| {
    ///         timeouts.set(1, later);
    ///         timeouts.set(1, later + Duration::from_secs(1)); // moved, not added
    ///         (timeouts.len(), timeouts.first())
    ///     })
    ///     .await?;
    /// assert_eq!(first, (1, Some(later + Duration::from_secs(1))));
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn set(&self, token: u64, at: Instant) {
        let earliest = {
            let mut table = lock(&self.inner.table);
            // What the loop's deadline counts (`run_ends`): not those due and left untaken,
            // which bring no run.
            let first = table.first_set();
            table.take_out(token);
            table.by_token.insert(token, at);
            table.in_order.insert((at, token));
            first.is_none_or(|first| at < first)
        };
        // After the table, as a run's end reads it after it leaves: a run this one missed
        // finds it then, or this sees the run over and kicks.
        if earliest && !self.inner.in_run.load(Ordering::SeqCst) {
            self.inner.kicker.kick();
        }
    }

    /// Removes timeout `token` (D-Bus's `remove_timeout`, Avahi's `timeout_free`): it is not
    /// handed. Whether it was set.
    pub fn remove(&self, token: u64) -> bool {
        lock(&self.inner.table).take_out(token)
    }

    /// Whether timeout `token` is set (not handed yet, nor removed).
    pub fn contains(&self, token: u64) -> bool {
        let table = lock(&self.inner.table);
        table.by_token.contains_key(&token) || table.handing.iter().any(|&(_, t)| t == token)
    }

    /// When the first timeout falls due (or fell due: one a run left untaken counts).
    pub fn first(&self) -> Option<Instant> {
        lock(&self.inner.table).first()
    }

    /// How many timeouts are set.
    pub fn len(&self) -> usize {
        let table = lock(&self.inner.table);
        table.by_token.len() + table.handing.len()
    }

    /// Whether no timeout is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A run begins (its calls first): a timeout set from now until it ends needs no kick.
    pub(crate) fn run_begins(&self) {
        self.inner.in_run.store(true, Ordering::SeqCst);
    }

    /// The timeouts due at `now` are to be handed, earliest first, after any a run before left
    /// unhanded.
    pub(crate) fn take_due(&self, now: Instant) {
        let mut table = lock(&self.inner.table);
        let left = !table.handing.is_empty();
        while let Some(&(at, token)) = table.in_order.first() {
            if at > now {
                break;
            }
            table.in_order.pop_first();
            table.by_token.remove(&token);
            table.handing.push_back((at, token));
        }
        // Earliest first across those a run before left too.
        if left {
            table.handing.make_contiguous().sort_unstable();
        }
    }

    /// The run ended: when the first timeout set falls due, read after the run is over for a
    /// `set` elsewhere (see there). Those due that the run did not take wait for the next run,
    /// and do not bring one (a loop that never takes them would run again and again).
    pub(crate) fn run_ends(&self) -> Option<Instant> {
        self.inner.in_run.store(false, Ordering::SeqCst);
        lock(&self.inner.table).first_set()
    }

    /// The next timeout to hand, taken out.
    pub(crate) fn next_expired(&self) -> Option<u64> {
        lock(&self.inner.table)
            .handing
            .pop_front()
            .map(|(_, token)| token)
    }
}

impl Table {
    fn first(&self) -> Option<Instant> {
        let handing = self.handing.front().map(|&(at, _)| at);
        handing.into_iter().chain(self.first_set()).min()
    }

    /// When the first timeout still to fall due does: those due and left untaken aside.
    fn first_set(&self) -> Option<Instant> {
        self.in_order.first().map(|&(at, _)| at)
    }

    /// Takes `token` out, set or about to be handed: whether it was either.
    fn take_out(&mut self, token: u64) -> bool {
        if let Some(at) = self.by_token.remove(&token) {
            return self.in_order.remove(&(at, token));
        }
        let handing = self.handing.iter().position(|&(_, t)| t == token);
        handing.and_then(|at| self.handing.remove(at)).is_some()
    }
}

/// Iterator returned by [`Run::expired`](crate::Run::expired): the tokens of the loop's
/// [`Timeouts`] due at the run's start, each taken out as it is handed.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Expired, Pump};
///
/// # futures_lite::future::block_on(async {
/// let (pump, _library) = Pump::builder().build_with_state(
///     |setup| Ok(setup.timeouts()),
///     |_, run| {
///         let expired: Expired<'_> = run.expired();
///         for _token in expired {
///             // ffi::timeout_handle(timeout)
///         }
///         None
///     },
/// )?;
/// pump.turn().await?;
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Expired<'a> {
    pub(crate) timeouts: Option<&'a Timeouts>,
}

impl Iterator for Expired<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        self.timeouts?.next_expired()
    }
}

impl fmt::Debug for Timeouts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeouts")
            .field("len", &self.len())
            .field("first", &self.first())
            .finish_non_exhaustive()
    }
}
