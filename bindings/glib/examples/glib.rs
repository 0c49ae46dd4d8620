//! 1 000 GLib timeout sources with random delays (and an idle source), awaited concurrently from
//! 1 000 tasks, the context iterated by ffi-pump on its own thread (prepare, query, check,
//! dispatch, no tick); then 200 I/O watches on a socket, each fired by a write: the time from the
//! write to the task seeing its source fire, and how many iterations the context made while
//! nothing was due.
//!
//! Run it with (needs Debian's `libglib2.0-dev`):
//!
//! ```text
//! cargo run --release -p ffi-pump-glib --example glib
//! ```
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump_glib::Sources;

const SOURCES: u64 = 1_000;
const IO_WATCHES: u64 = 200;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sources = Arc::new(Sources::new()?);
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
                    let fired = sources.after(delay).timeout(Duration::from_secs(5));
                    let fired = fired.await?.at;
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
    let counters = sources.counters();
    let fires = counters.fires.load(Ordering::SeqCst);
    let worst = late_ms.iter().cloned().fold(0.0, f64::max);
    println!(
        "GLib main context through ffi-pump ({SOURCES} sources, 1 idle + timeouts over 200 ms)"
    );
    println!("  fires                {fires} for {SOURCES} sources");
    println!(
        "  iterations           {}",
        counters.iterations.load(Ordering::SeqCst)
    );
    println!("  pump rounds          {}", sources.pump().stats().rounds);
    println!(
        "  iterations that dispatched {}",
        counters.dispatches.load(Ordering::SeqCst)
    );
    println!("  latest fire vs delay {worst:.1} ms");
    println!("  wall time            {:.1} ms", wall.as_secs_f64() * 1e3);

    // Nothing due: the context is not iterated.
    let idle_before = counters.iterations.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(300));
    let idle = counters.iterations.load(Ordering::SeqCst) - idle_before;
    println!("  iterations in 300 ms with nothing due {idle}");

    // I/O watches: one source per write, fired when the socket is readable.
    let watches = Sources::new()?;
    let (reader, mut writer) = UnixStream::pair()?;
    reader.set_nonblocking(true)?;
    let mut write_to_seen = Vec::new();
    smol::block_on(async {
        for _ in 0..IO_WATCHES {
            let fired = watches.readable(reader.as_raw_fd());
            // The watch is made before the next run, whose iteration then polls the socket.
            watches.pump().turn().await?;
            watches.pump().turn().await?;
            let written = Instant::now();
            writer.write_all(b"x")?;
            fired.timeout(Duration::from_secs(5)).await?;
            write_to_seen.push(written.elapsed().as_secs_f64() * 1e6);
            let mut byte = [0_u8; 1];
            (&reader).read_exact(&mut byte)?;
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    write_to_seen.sort_by(f64::total_cmp);
    let at = |q: f64| write_to_seen[((write_to_seen.len() - 1) as f64 * q) as usize];
    println!(
        "  I/O watch, write → task has it ({IO_WATCHES} writes): p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        at(0.5),
        at(0.99),
        at(1.0)
    );
    Ok(())
}
