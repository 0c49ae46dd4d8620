//! 1 000 GLib timeout sources with random delays (and an idle source), awaited concurrently from
//! 1 000 tasks, the context iterated by ffi-pump on its own thread.
//!
//! Run it with (needs Debian's `libglib2.0-dev`):
//!
//! ```text
//! cargo run --release -p ffi-pump-glib --example glib
//! ```
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump_glib::Sources;

const SOURCES: u32 = 1_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sources = Arc::new(Sources::new(SOURCES)?);
    let started = Instant::now();
    let delays: Vec<Duration> = (0..SOURCES)
        .map(|id| {
            // Source 0 is an idle source; the others fire within 200 ms.
            if id == 0 {
                Duration::ZERO
            } else {
                Duration::from_millis(fastrand::u64(1..200))
            }
        })
        .collect();
    let late_ms = smol::block_on(async {
        let tasks: Vec<_> = (0..SOURCES)
            .map(|id| {
                let sources = sources.clone();
                let delay = delays[id as usize];
                smol::spawn(async move {
                    let added = Instant::now();
                    sources.add(id, delay);
                    let fired = sources.fired(id, Duration::from_secs(5)).await?;
                    Ok::<f64, ffi_pump::Error>(
                        (fired - added).saturating_sub(delay).as_secs_f64() * 1e3,
                    )
                })
            })
            .collect();
        let mut late = Vec::with_capacity(tasks.len());
        for task in tasks {
            late.push(task.await?);
        }
        Ok::<_, ffi_pump::Error>(late)
    })?;
    let wall = started.elapsed();
    let once = (0..SOURCES).filter(|&id| sources.fires(id) == 1).count();
    let counters = sources.counters();
    let worst = late_ms.iter().cloned().fold(0.0, f64::max);
    println!(
        "GLib main context through ffi-pump ({SOURCES} sources, 1 idle + timeouts over 200 ms)"
    );
    println!("  fired exactly once   {once} / {SOURCES}");
    println!(
        "  iterations           {}",
        counters.iterations.load(Ordering::SeqCst)
    );
    println!("  pump rounds          {}", sources.pump().stats().rounds);
    println!(
        "  overlapping          {}",
        counters.overlaps.load(Ordering::SeqCst)
    );
    println!(
        "  acquire failures     {}",
        counters.acquire_failures.load(Ordering::SeqCst)
    );
    println!("  latest fire vs delay {worst:.1} ms");
    println!("  wall time            {:.1} ms", wall.as_secs_f64() * 1e3);
    Ok(())
}
