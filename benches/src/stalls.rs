//! How often this machine stops running a thread that never blocks: the floor under every tail
//! latency measured here.
//!
//! One thread per core reads the clock in a loop; a gap between two reads is time the thread was
//! not running (preempted by the kernel, or its virtual CPU descheduled by the host). An id that
//! falls due in such a gap is seen late by every approach alike.

use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

/// Gaps one spinning thread saw.
#[derive(Debug, Clone, Serialize)]
pub struct Stalls {
    /// Seconds it spun.
    pub seconds: f64,
    /// Gaps longer than 200 µs.
    pub over_200us: u64,
    /// Gaps longer than 1 ms.
    pub over_1ms: u64,
    /// Gaps longer than 2 ms.
    pub over_2ms: u64,
    /// The longest gap, in µs.
    pub max_us: f64,
    /// Each gap longer than 1 ms: (start, length) in ms since the threads began.
    pub long_gaps_ms: Vec<(f64, f64)>,
    /// How much of this thread's gaps longer than 1 ms another thread was stopped too, in ms: 0
    /// when the machine stops one CPU at a time.
    pub shared_ms: f64,
}

/// Spins `threads` threads for `span` each, side by side.
pub fn measure(threads: usize, span: Duration) -> Vec<Stalls> {
    let origin = Instant::now();
    let spinners: Vec<_> = (0..threads)
        .map(|_| thread::spawn(move || spin(origin, span)))
        .collect();
    let mut seen: Vec<Stalls> = spinners
        .into_iter()
        .map(|spinner| spinner.join().expect("a spinning thread does not panic"))
        .collect();
    for i in 0..seen.len() {
        let shared: f64 = seen[i]
            .long_gaps_ms
            .iter()
            .map(|&gap| {
                let others = seen.iter().enumerate().filter(|&(j, _)| j != i);
                others
                    .flat_map(|(_, other)| other.long_gaps_ms.iter())
                    .map(|&other| overlap_ms(gap, other))
                    .sum::<f64>()
            })
            .sum();
        seen[i].shared_ms = shared;
    }
    seen
}

/// How long two (start, length) intervals overlap.
fn overlap_ms((a, a_len): (f64, f64), (b, b_len): (f64, f64)) -> f64 {
    ((a + a_len).min(b + b_len) - a.max(b)).max(0.0)
}

fn spin(origin: Instant, span: Duration) -> Stalls {
    let start = Instant::now();
    let mut long_gaps_ms = Vec::new();
    let mut last = start;
    let (mut over_200us, mut over_1ms, mut over_2ms) = (0, 0, 0);
    let mut max = Duration::ZERO;
    while last - start < span {
        let now = Instant::now();
        let gap = now - last;
        over_200us += u64::from(gap > Duration::from_micros(200));
        over_1ms += u64::from(gap > Duration::from_millis(1));
        over_2ms += u64::from(gap > Duration::from_millis(2));
        if gap > Duration::from_millis(1) {
            let at = (last - origin).as_secs_f64() * 1e3;
            long_gaps_ms.push((at, gap.as_secs_f64() * 1e3));
        }
        max = max.max(gap);
        last = now;
    }
    Stalls {
        seconds: (last - start).as_secs_f64(),
        over_200us,
        over_1ms,
        over_2ms,
        max_us: max.as_secs_f64() * 1e6,
        long_gaps_ms,
        shared_ms: 0.0,
    }
}
