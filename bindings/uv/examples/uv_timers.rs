//! 1 000 libuv timers spread over 200 ms, awaited from 1 000 tasks; the uv loop lives on the
//! pump thread, which runs it at the loop's own next timeout. Prints how many runs it took and
//! how late the tasks saw their timers.
//!
//! Run it with (needs Debian's `libuv1-dev`):
//!
//! ```text
//! cargo run --release -p ffi-pump-uv --example uv_timers
//! ```
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump_uv::Uv;

const TIMERS: u64 = 1_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uv = Arc::new(Uv::new()?);
    let started = Instant::now();
    let mut late: Vec<Duration> = smol::block_on(async {
        let tasks: Vec<_> = (0..TIMERS)
            .map(|i| {
                let uv = uv.clone();
                smol::spawn(async move {
                    // The first due 50 ms from now, so every timer exists by then.
                    let delay = Duration::from_millis(50 + i * 200 / TIMERS);
                    let fired = uv.sleep(delay, Duration::from_secs(10)).await?;
                    Ok::<_, ffi_pump::Error>(Instant::now().saturating_duration_since(fired.due))
                })
            })
            .collect();
        let mut late = Vec::new();
        for task in tasks {
            late.push(task.await?);
        }
        Ok::<_, ffi_pump::Error>(late)
    })?;
    let wall = started.elapsed();
    late.sort_unstable();
    let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    println!("libuv timers through ffi-pump ({TIMERS} tasks)");
    println!("  timers fired       {}", late.len());
    println!(
        "  uv_run() calls     {}",
        uv.counters().runs.load(Ordering::SeqCst)
    );
    println!("  pump rounds        {}", uv.pump().stats().rounds);
    println!(
        "  due→seen           p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        at(0.5),
        at(0.99),
        at(1.0)
    );
    println!("  wall time          {:.1} ms", wall.as_secs_f64() * 1e3);
    uv.pump().close();
    smol::block_on(uv.pump().closed()).expect("closed from outside the pump");
    Ok(())
}
