//! 10 000 tasks wait on ids of a C event loop (the `fake-loop` fixture) through one pump, on the
//! default backend (smol), and the run is reported: rounds, C calls, overlaps, latency.
//!
//! Run it with:
//!
//! ```text
//! cargo run --release --example demo
//! ```
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_loop::{now_ns, FakeLoop};
use ffi_pump::Pump;

const WAITERS: u32 = 10_000;
const SPREAD: Duration = Duration::from_millis(200);

fn main() -> Result<(), ffi_pump::Error> {
    let fx = Arc::new(FakeLoop::new(WAITERS));
    let started = Instant::now();
    for id in 0..WAITERS {
        fx.arm_in(id, SPREAD.mul_f64(fastrand::f64()));
    }

    let run_fx = fx.clone();
    let pump = Pump::builder()
        .interval(Duration::from_millis(1))
        .build(move || {
            run_fx
                .run_once()
                .expect("the pump never re-enters the loop")
        })?;
    let backend = pump.spawn();

    let mut latencies_us = smol::block_on(async {
        let tasks: Vec<_> = (0..WAITERS)
            .map(|id| {
                let (pump, fx) = (pump.clone(), fx.clone());
                smol::spawn(async move {
                    let check = fx.clone();
                    pump.wait_until(move || check.check(id))
                        .timeout(Duration::from_secs(30))
                        .await?;
                    let seen = now_ns();
                    let ready = fx.ready_at_ns(id).expect("ready in C");
                    Ok::<f64, ffi_pump::Error>(seen.saturating_sub(ready) as f64 / 1e3)
                })
            })
            .collect();
        let mut latencies = Vec::with_capacity(tasks.len());
        for task in tasks {
            latencies.push(task.await?);
        }
        Ok::<_, ffi_pump::Error>(latencies)
    })?;
    let wall = started.elapsed();
    latencies_us.sort_by(f64::total_cmp);
    let percentile = |p: f64| latencies_us[((latencies_us.len() - 1) as f64 * p).round() as usize];

    let c = fx.stats();
    let s = pump.stats();
    println!("ffi-pump demo ({backend:?} backend, 1 ms interval, C loop cost 2 µs)");
    println!("  waiters            {WAITERS} (ids ready at random over {SPREAD:?})");
    println!("  completed          {}", latencies_us.len());
    println!("  pump rounds        {}", s.rounds);
    println!("  C loop calls       {}", c.calls);
    println!("  C status checks    {}", c.checks);
    println!("  overlapping runs   {}", c.run_overlaps);
    println!("  checks during runs {}", c.check_overlaps);
    println!("  re-entrant calls   {}", c.reentrant);
    println!("  wall time          {:.1} ms", wall.as_secs_f64() * 1e3);
    println!(
        "  latency ready-in-C -> future saw it: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        percentile(0.50),
        percentile(0.99),
        percentile(1.0)
    );
    pump.close();
    Ok(())
}
