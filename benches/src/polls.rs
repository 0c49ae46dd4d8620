//! How long a waiting task's polls of its wait take: what a wait that never blocks on the
//! pump's evaluation buys over one that shares a lock with it.
//!
//! The simple design's wait locks the registry's map on every poll, and the round holds that map
//! while it runs the loop and every check: a worker that polls a wait meanwhile stops until the
//! round ends. ffi-pump's wait takes the loop lock only with `try_lock`, and no lock it takes is
//! held through a pass (a dropped wait waits out at most one block of 64 checks).
//!
//! Each poll of a [`Timed`] wait is timed when `COMPARE_POLL_TIMES` is set (so that the cells
//! measuring CPU carry no clock reads), into a histogram shared by all threads, in buckets of an
//! eighth of their value: quantiles and counts over a bound are read within that.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// One per ns below 8 ns, then 8 per power of two up to 2^42 ns (73 minutes; longer polls
/// count in the last): a quantile is read within 1/8 of its value.
const BUCKETS: usize = 40 * 8;

/// The polls timed in this process.
struct Histogram {
    counts: [AtomicU64; BUCKETS],
    longest_ns: AtomicU64,
}

fn histogram() -> &'static Histogram {
    static HISTOGRAM: OnceLock<Histogram> = OnceLock::new();
    HISTOGRAM.get_or_init(|| Histogram {
        counts: std::array::from_fn(|_| AtomicU64::new(0)),
        longest_ns: AtomicU64::new(0),
    })
}

/// Whether this process times polls (`COMPARE_POLL_TIMES` set).
pub fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("COMPARE_POLL_TIMES").is_some())
}

/// The bucket of a poll of `ns` nanoseconds: below 8 ns, one per ns; above, 8 per power of two
/// (the top four bits of `ns`).
fn bucket(ns: u64) -> usize {
    if ns < 8 {
        return ns as usize;
    }
    let octave = 63 - ns.leading_zeros() as usize;
    let step = (ns >> (octave - 3)) as usize & 7;
    ((octave - 2) * 8 + step).min(BUCKETS - 1)
}

/// The smallest duration in `bucket`, in ns.
fn bucket_floor(bucket: usize) -> u64 {
    if bucket < 8 {
        return bucket as u64;
    }
    let (octave, step) = (bucket / 8 + 2, bucket as u64 % 8);
    (8 + step) << (octave - 3)
}

fn record(ns: u64) {
    let histogram = histogram();
    histogram.counts[bucket(ns)].fetch_add(1, Relaxed);
    histogram.longest_ns.fetch_max(ns, Relaxed);
}

/// A wait whose polls are timed (when [`enabled`]).
#[derive(Debug)]
pub struct Timed<F>(pub F);

impl<F: Future + Unpin> Future for Timed<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if !enabled() {
            return Pin::new(&mut self.0).poll(cx);
        }
        let start = Instant::now();
        let polled = Pin::new(&mut self.0).poll(cx);
        record(start.elapsed().as_nanos() as u64);
        polled
    }
}

/// What the timed polls of a cell took.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct PollTimes {
    /// Polls timed.
    pub polls: u64,
    /// The median poll, in µs (within 1/8 of it).
    pub p50_us: f64,
    /// The 99.9th percentile, in µs (within 1/8 of it).
    pub p999_us: f64,
    /// Polls that took longer than 100 µs: those in the buckets above 100 µs's, so from
    /// 106.5 µs on.
    pub over_100us: u64,
    /// Polls that took longer than 1 ms: from 1.05 ms on, as above.
    pub over_1ms: u64,
    /// The longest poll, in µs.
    pub longest_us: f64,
}

/// The polls timed so far in this process; `None` if none was.
pub fn times() -> Option<PollTimes> {
    let histogram = histogram();
    let counts: Vec<u64> = histogram.counts.iter().map(|c| c.load(Relaxed)).collect();
    let polls: u64 = counts.iter().sum();
    if polls == 0 {
        return None;
    }
    let quantile = |q: f64| {
        let rank = ((polls as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, &count) in counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return bucket_floor(bucket) as f64 / 1e3;
            }
        }
        f64::NAN
    };
    // Counted from the first bucket wholly above the bound: within 1/8 of it.
    let over = |ns: u64| (bucket(ns) + 1..BUCKETS).map(|b| counts[b]).sum();
    Some(PollTimes {
        polls,
        p50_us: quantile(0.5),
        p999_us: quantile(0.999),
        over_100us: over(100_000),
        over_1ms: over(1_000_000),
        longest_us: histogram.longest_ns.load(Relaxed) as f64 / 1e3,
    })
}

#[cfg(test)]
mod tests {
    use super::{bucket, bucket_floor, BUCKETS};

    #[test]
    fn every_duration_falls_in_the_bucket_whose_floor_is_at_most_it_and_an_eighth_below() {
        let mut ns = 1_u64;
        while ns < 1 << 42 {
            let b = bucket(ns);
            assert!(b < BUCKETS);
            let floor = bucket_floor(b);
            assert!(floor <= ns, "{ns} ns in bucket {b} from {floor}");
            assert!(ns - floor <= ns / 8, "{ns} ns in bucket {b} from {floor}");
            assert!(
                b + 1 == BUCKETS || bucket_floor(b + 1) > ns,
                "{ns} ns below bucket {b}"
            );
            ns = ns * 9 / 8 + 1;
        }
        assert_eq!(
            bucket(u64::MAX),
            BUCKETS - 1,
            "longer polls count in the last"
        );
    }
}
