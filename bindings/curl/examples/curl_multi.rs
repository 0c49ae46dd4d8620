//! 200 concurrent downloads from 200 tasks through libcurl's multi interface, one `perform()` per
//! pump round, against a local HTTP server started by the example itself.
//!
//! Run it with (needs only gcc: libcurl is built from source by the `curl` crate):
//!
//! ```text
//! cargo run --release -p ffi-pump-curl --example curl_multi
//! ```
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump_curl::server::{checksum, expected_body, serve};
use ffi_pump_curl::Client;

const REQUESTS: usize = 200;
const SIZES: [usize; 4] = [0, 1_024, 65_536, 1_048_576];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = serve()?;
    let client = Arc::new(Client::new()?);
    let started = Instant::now();
    let outcomes = smol::block_on(async {
        let tasks: Vec<_> = (0..REQUESTS)
            .map(|i| {
                let client = client.clone();
                let (size, delay) = (SIZES[i % SIZES.len()], (i % 5) * 20);
                let url = format!("http://{addr}/size/{size}/delay/{delay}");
                smol::spawn(async move {
                    let outcome = client.get(&url, Duration::from_secs(5)).await;
                    (size, outcome)
                })
            })
            .collect();
        let mut outcomes = Vec::with_capacity(REQUESTS);
        for task in tasks {
            outcomes.push(task.await);
        }
        outcomes
    });
    let wall = started.elapsed();

    let (mut ok, mut failed, mut bytes, mut digest) = (0, 0, 0, 0_u64);
    for (size, outcome) in &outcomes {
        match outcome {
            Ok(response) if response.status == 200 && response.body == expected_body(*size) => {
                ok += 1;
                bytes += response.body.len();
                digest = digest.wrapping_add(checksum(&response.body));
            }
            Ok(response) => {
                failed += 1;
                eprintln!(
                    "bad response: status {}, {} bytes",
                    response.status,
                    response.body.len()
                );
            }
            Err(err) => {
                failed += 1;
                eprintln!("failed: {err:?}");
            }
        }
    }
    let stats = client.pump().stats();
    println!("curl multi through ffi-pump ({REQUESTS} tasks, server on {addr})");
    println!("  transfers ok       {ok}");
    println!("  transfers failed   {failed}");
    println!("  total bytes        {bytes} (sum of FNV-1a checksums {digest:016x})");
    println!("  perform() calls    {}", client.performs());
    println!("  pump rounds        {}", stats.rounds);
    println!("  kicks              {}", stats.kicks);
    println!("  wall time          {:.1} ms", wall.as_secs_f64() * 1e3);
    if failed > 0 {
        return Err(format!("{failed} transfers failed").into());
    }
    Ok(())
}
