use std::sync::atomic::Ordering::Relaxed;

use crate::sync::AtomicU64;

/// A snapshot of a pump's counters, from [`Pump::stats`](crate::Pump::stats).
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
/// let stats = pump.stats();
/// assert!(stats.rounds >= 1);
/// assert_eq!(stats.pending_waits, 0);
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// How many runs have ended: calls of `run_once` that returned (or panicked); one under
    /// way counts once it ends.
    pub rounds: u64,
    /// Waits not finished yet: a `wait_*` future from its first poll, a
    /// [`LoopHandle::request`](crate::LoopHandle::request) or
    /// [`submit`](crate::LoopHandle::submit) from the call that made it (its work is sent then)
    /// until it is polled to its end or dropped — answered but not polled, it still counts —
    /// a [`Subscription`](crate::Subscription) from its first poll until it ends (also when the
    /// library ends it: nothing more comes, whether or not the stream was polled since) or is
    /// dropped.
    /// Each keeps the pump's ticks and deadlines going (see "Idle" in the crate docs).
    pub pending_waits: usize,
    /// Timer ticks that found a [`Pump::turn`](crate::Pump::turn) running the loop and joined it
    /// instead of running it again.
    pub skipped_ticks: u64,
    /// Timer ticks the pump could not take on time: they came due while a run (or waiters
    /// holding the loop lock) took longer than the interval, or more than an interval passed
    /// before the driver got to them (the executor stalled). They are not made up: the ticks
    /// start again one interval after the run that overran them, or after the late one's run
    /// began.
    pub late_ticks: u64,
    /// Kicks on an open pump: calls to [`Pump::kick`](crate::Pump::kick) and
    /// [`Kicker::kick`](crate::Kicker::kick), and those a [`LoopHandle`](crate::LoopHandle)'s
    /// calls, posts and cancels make to wake the loop's thread — and a
    /// [`turn`](crate::Pump::turn) of a loop on its own thread, which asks that thread for its
    /// run the same way; and a [`Subscription`](crate::Subscription) that has room again after
    /// its library's emit was refused.
    pub kicks: u64,
    /// Whether `run_once` has panicked (the pump is then also closed), or the `Drop` of the
    /// loop's state or of what `run_once` captured did.
    pub panicked: bool,
    /// Whether the pump is closed.
    pub closed: bool,
}

/// The counters behind [`Stats`] that no protocol reads: statistics only.
///
/// `Relaxed`: each is a count on its own; nothing else is published through it, and a snapshot
/// need not be consistent with the other fields of [`Stats`].
#[derive(Debug)]
pub(crate) struct Counters {
    skipped_ticks: AtomicU64,
    late_ticks: AtomicU64,
    kicks: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            skipped_ticks: AtomicU64::new(0),
            late_ticks: AtomicU64::new(0),
            kicks: AtomicU64::new(0),
        }
    }
}

impl Counters {
    pub(crate) fn count_skipped_tick(&self) {
        self.skipped_ticks.fetch_add(1, Relaxed);
    }

    pub(crate) fn count_late_tick(&self) {
        self.late_ticks.fetch_add(1, Relaxed);
    }

    pub(crate) fn count_kick(&self) {
        self.kicks.fetch_add(1, Relaxed);
    }

    pub(crate) fn skipped_ticks(&self) -> u64 {
        self.skipped_ticks.load(Relaxed)
    }

    pub(crate) fn late_ticks(&self) -> u64 {
        self.late_ticks.load(Relaxed)
    }

    pub(crate) fn kicks(&self) -> u64 {
        self.kicks.load(Relaxed)
    }
}
