//! 2 000 Tcl timers spread over 200 ms (the first due 50 ms after they start to be made, so all
//! exist by then), awaited from 2 000 tasks, with the interpreter on the
//! pump thread run at each timer's deadline, side by side with the same binding run every 1 ms
//! while timers are pending (how a wrapper without deadlines drives it). Alternates the two for
//! a few repeats and prints, per repeat: runs per second while waiting, CPU (all threads of the
//! process, from /proc), and due→seen p50/p99 (from the timer's due time to its task seeing it).
//!
//! Run it with (needs Debian's `tcl-dev`):
//!
//! ```text
//! cargo run --release -p ffi-pump-tcl --example tcl_timers [REPEATS]
//! ```
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump_binding_support::process_cpu_ns;
use ffi_pump_tcl::{Schedule, Tcl};

const TIMERS: u64 = 2_000;
const SPREAD_MS: u64 = 200;
/// The first timer is due this long after the timers start to be made, so all exist by then.
const LEAD_MS: u64 = 50;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let repeats: u32 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    println!(
        "{TIMERS} Tcl timers over {SPREAD_MS} ms\n\
         | schedule | repeat | runs | runs/s | CPU cores | due→seen p50 µs | p99 µs | max µs |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for repeat in 1..=repeats {
        for schedule in [
            Schedule::Deadlines,
            Schedule::Every(Duration::from_millis(1)),
        ] {
            let row = measure(schedule)?;
            let name = match schedule {
                Schedule::Deadlines => "deadlines",
                Schedule::Every(_) => "every 1 ms",
            };
            println!(
                "| {name} | {repeat} | {} | {:.0} | {:.3} | {:.0} | {:.0} | {:.0} |",
                row.runs, row.runs_per_s, row.cpu_cores, row.p50_us, row.p99_us, row.max_us
            );
        }
    }
    Ok(())
}

struct Row {
    runs: u64,
    runs_per_s: f64,
    cpu_cores: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
}

fn measure(schedule: Schedule) -> Result<Row, Box<dyn std::error::Error>> {
    let tcl = Arc::new(Tcl::new(schedule)?);
    // Let the pump thread start, outside the measured phase.
    smol::block_on(tcl.eval("set ready 1"))?.map_err(|e| e.to_string())?;
    let runs_before = tcl.counters().runs.load(Ordering::SeqCst);
    let cpu_before = process_cpu_ns();
    let started = Instant::now();
    let late = smol::block_on(async {
        let tasks: Vec<_> = (0..TIMERS)
            .map(|i| {
                let tcl = tcl.clone();
                smol::spawn(async move {
                    let delay = Duration::from_millis(LEAD_MS + i * SPREAD_MS / TIMERS);
                    let fired = tcl.sleep(delay, Duration::from_secs(10)).await?;
                    Ok::<_, ffi_pump::Error>(Instant::now().saturating_duration_since(fired.due))
                })
            })
            .collect();
        let mut late = Vec::with_capacity(TIMERS as usize);
        for task in tasks {
            late.push(task.await?);
        }
        Ok::<_, ffi_pump::Error>(late)
    })?;
    let wall = started.elapsed();
    let cpu = process_cpu_ns() - cpu_before;
    let runs = tcl.counters().runs.load(Ordering::SeqCst) - runs_before;
    if tcl.counters().overlaps.load(Ordering::SeqCst) != 0 {
        return Err("overlapping runs".into());
    }
    let mut late: Vec<f64> = late.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    late.sort_by(f64::total_cmp);
    let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize];
    tcl.pump().close();
    smol::block_on(tcl.pump().closed()).expect("closed from outside the pump");
    Ok(Row {
        runs,
        runs_per_s: runs as f64 / wall.as_secs_f64(),
        cpu_cores: cpu as f64 / wall.as_nanos() as f64,
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us: at(1.0),
    })
}
