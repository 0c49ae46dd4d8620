//! The workload and the peers of `compare`: ffi-pump side by side with the approaches users write
//! today, each awaiting ids of the `fake-loop` C fixture.
//!
//! Every approach gets the same fixture (2 µs busy cost per loop call, ids ready at random over
//! 200 ms) and the same 2 worker threads.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

pub mod collect;
pub mod peers;
pub mod polls;
pub mod report;
pub mod stalls;
pub mod usage;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fake_loop::{now_ns, FakeLoop};

/// C loop cost per call.
pub const LOOP_COST: Duration = Duration::from_micros(2);
/// Ids become ready uniformly at random over this span from the start.
pub const SPREAD: Duration = Duration::from_millis(200);
/// Worker threads of every runtime.
pub const WORKERS: usize = 2;
/// The pump's and the fast background task's interval.
pub const INTERVAL: Duration = Duration::from_millis(1);

/// A fixture with `n` ids, armed once the waiters for them exist.
#[derive(Debug)]
pub struct Workload {
    /// The C side.
    pub fx: Arc<FakeLoop>,
    /// How many ids (and waiters).
    pub n: u32,
    deadlines: Mutex<Vec<u64>>,
    armed: Mutex<Option<Armed>>,
}

/// The first deadline of an armed workload: where the measured phase of a cell starts.
#[derive(Debug, Clone, Copy)]
pub struct Armed {
    /// [`now_ns`] clock.
    pub at_ns: u64,
    /// The process's usage then.
    pub usage: usage::Usage,
    /// Loop calls made before (while the waiters registered).
    pub loop_calls: u64,
    /// Of those, runs that made no id ready.
    pub idle_runs: u64,
    /// How long after the first possible deadline the arming ended (0 when it ended before, as
    /// intended); ids due meanwhile may count the arming as latency.
    pub arming_late_us: f64,
    /// How long arming all ids took, in µs.
    pub arming_us: f64,
}

impl Workload {
    /// A fixture with ids `0..n`, none armed yet.
    pub fn new(n: u32) -> Workload {
        let fx = Arc::new(FakeLoop::new(n));
        fx.set_cost(LOOP_COST);
        Workload {
            fx,
            n,
            deadlines: Mutex::new(Vec::new()),
            armed: Mutex::new(None),
        }
    }

    /// Arms every id at a random moment within [`SPREAD`] from a start a little ahead, and
    /// returns at that start: the measured phase.
    ///
    /// Every approach calls this right after spawning its N waiters, so the time it takes to
    /// spawn them is not counted as latency of the ids that fall due meanwhile. The ids are armed
    /// in one call, ahead of the first deadline ([`arming_lead`]): armed one by one at a start of
    /// "now", ids falling due in the first 1 – 2 ms (10 000 ids) or 15 – 25 ms (100 000) waited
    /// for the arming thread to let go of the fixture's lock, in every approach alike.
    pub fn arm(&self) {
        let spread = SPREAD.as_nanos() as u64;
        let offsets: Vec<u64> = (0..self.n).map(|_| fastrand::u64(0..spread)).collect();
        let ids: Vec<u32> = (0..self.n).collect();
        let lead = if arms_early() {
            Duration::ZERO
        } else {
            arming_lead(self.n)
        };
        let start = now_ns() + lead.as_nanos() as u64;
        let deadlines: Vec<u64> = offsets.iter().map(|offset| start + offset).collect();
        let arming_ns = now_ns();
        self.fx.arm_many(&ids, &deadlines);
        let armed_ns = now_ns();
        if let Some(ahead) = start.checked_sub(armed_ns) {
            std::thread::sleep(Duration::from_nanos(ahead));
        }
        let stats = self.fx.stats();
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some(Armed {
            at_ns: now_ns(),
            usage: usage::now(),
            loop_calls: stats.calls,
            idle_runs: stats.idle_runs,
            arming_late_us: armed_ns.saturating_sub(start) as f64 / 1e3,
            arming_us: (armed_ns - arming_ns) as f64 / 1e3,
        });
        *self
            .deadlines
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = deadlines;
    }

    /// When [`arm`](Workload::arm) was called, if it was.
    pub fn armed(&self) -> Option<Armed> {
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The deadline of each id ([`now_ns`] clock), once armed.
    pub fn deadlines(&self) -> Vec<u64> {
        self.deadlines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// How far ahead of arming the first deadline lies: room for [`FakeLoop::arm_many`] of `n` ids
/// (`arming_us` of a cell: 0.3 ms for 10 000, 2.8 – 5.1 ms for 100 000 and 26 – 51 ms for 1 000 000
/// here) with a margin of four times or more.
pub fn arming_lead(n: u32) -> Duration {
    Duration::from_millis(2) + Duration::from_nanos(200) * n
}

/// Whether this process arms its ids early (`COMPARE_ARMING=early`, which `compare --early`
/// sets for its cells): right after spawning the waits, with their first deadline at once, so ids
/// fall due while the waits are still registering. Otherwise (the default) every wait is in place
/// and the first deadline lies ahead of the arming ([`arming_lead`]).
pub fn arms_early() -> bool {
    std::env::var("COMPARE_ARMING").is_ok_and(|mode| mode == "early")
}

/// A tokio multi-thread runtime with [`WORKERS`] workers, as every tokio peer uses.
pub fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}
