//! 200 concurrent downloads from 200 tasks through libcurl's multi interface, against a local HTTP
//! server started by the example itself. Runs the client driven by curl's sockets and timer (the
//! default), and for comparison with `perform()` at curl's timeouts capped at 1 ms and every 1 ms
//! (how interval-driven clients run it), alternating for a few repeats, and prints per repeat:
//! calls into curl's loop (`socket_action` or `perform`) in all and per transfer, per second, CPU
//! (every thread of the process, from /proc) and the time from the server having written a
//! response to its task having the body (p50 / p99).
//!
//! Run it with (needs only gcc: libcurl is built from source by the `curl` crate):
//!
//! ```text
//! cargo run --release -p ffi-pump-curl --example curl_multi [REPEATS]
//! ```
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/server/mod.rs"]
mod server;

use ffi_pump_binding_support::process_cpu_ns;
use ffi_pump_curl::{Client, Schedule};
use server::{checksum, expected_body, serve, written_at};

const REQUESTS: u64 = 200;
const SIZES: [usize; 4] = [0, 1_024, 65_536, 1_048_576];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let repeats: u32 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let addr = serve()?;
    let ids = AtomicU64::new(0);
    println!(
        "curl multi through ffi-pump ({REQUESTS} tasks, server on {addr})\n\
         | schedule | repeat | ok | bytes | runs of curl | runs per transfer | runs/s | CPU cores | written→seen p50 µs | p99 µs | wall ms |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for repeat in 1..=repeats {
        for schedule in [
            Schedule::Sockets,
            Schedule::CurlTimeout,
            Schedule::Every(Duration::from_millis(1)),
        ] {
            let name = match schedule {
                Schedule::Sockets => "sockets and timer",
                Schedule::CurlTimeout => "perform at curl's timeouts (≤ 1 ms)",
                Schedule::Every(_) => "every 1 ms",
            };
            let client = Arc::new(Client::with_schedule(schedule)?);
            let cpu_before = process_cpu_ns();
            let started = Instant::now();
            let outcomes = smol::block_on(async {
                let tasks: Vec<_> = (0..REQUESTS)
                    .map(|i| {
                        let client = client.clone();
                        let id = ids.fetch_add(1, Ordering::SeqCst);
                        let size = SIZES[i as usize % SIZES.len()];
                        let url =
                            format!("http://{addr}/size/{size}/delay/{}/id/{id}", (i % 5) * 20);
                        smol::spawn(async move {
                            let outcome = client.get(&url, Duration::from_secs(10)).await;
                            (id, size, outcome, Instant::now())
                        })
                    })
                    .collect();
                let mut outcomes = Vec::with_capacity(REQUESTS as usize);
                for task in tasks {
                    outcomes.push(task.await);
                }
                outcomes
            });
            let wall = started.elapsed();
            let cpu = process_cpu_ns() - cpu_before;
            let (mut ok, mut bytes, mut digest, mut late) = (0, 0, 0_u64, Vec::new());
            for (id, size, outcome, seen) in &outcomes {
                match outcome {
                    Ok(response)
                        if response.status == 200 && response.body == expected_body(*size) =>
                    {
                        ok += 1;
                        bytes += response.body.len();
                        digest = digest.wrapping_add(checksum(&response.body));
                        if let Some(written) = written_at(*id) {
                            late.push(seen.saturating_duration_since(written).as_secs_f64() * 1e6);
                        }
                    }
                    Ok(response) => eprintln!(
                        "bad response: status {}, {} bytes",
                        response.status,
                        response.body.len()
                    ),
                    Err(err) => eprintln!("failed: {err:?}"),
                }
            }
            late.sort_by(f64::total_cmp);
            let at = |q: f64| {
                late.get(((late.len().max(1) - 1) as f64 * q) as usize)
                    .copied()
            };
            let runs = client.runs();
            println!(
                "| {name} | {repeat} | {ok} | {bytes} | {runs} | {:.1} | {:.0} | {:.3} | {:.0} | {:.0} | {:.1} |",
                runs as f64 / REQUESTS as f64,
                runs as f64 / wall.as_secs_f64(),
                cpu as f64 / wall.as_nanos() as f64,
                at(0.5).unwrap_or(f64::NAN),
                at(0.99).unwrap_or(f64::NAN),
                wall.as_secs_f64() * 1e3,
            );
            if ok != REQUESTS {
                return Err(format!(
                    "{} transfers failed (checksums {digest:016x})",
                    REQUESTS - ok
                )
                .into());
            }
            client.pump().close();
            smol::block_on(client.pump().closed()).expect("closed from outside the pump");
        }
    }
    Ok(())
}
