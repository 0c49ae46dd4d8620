//! The tokio path: enable the `tokio` feature, spawn the pump detached from inside the runtime
//! (`Pump::spawn` picks tokio there), await a status with a timeout from another task.
//!
//! Run it with:
//!
//! ```text
//! cargo run --example tokio --features tokio
//! ```
use std::sync::Arc;
use std::time::Duration;

use fake_loop::FakeLoop;
use ffi_pump::Pump;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), ffi_pump::Error> {
    let fx = Arc::new(FakeLoop::new(1));
    let run_fx = fx.clone();
    let pump = Pump::new(move || run_fx.run_once().expect("not re-entered"));
    let backend = pump.spawn();

    fx.arm_in(0, Duration::from_millis(20));
    let check = fx.clone();
    let waiter = tokio::spawn({
        let pump = pump.clone();
        async move {
            pump.wait_until(move || check.check(0))
                .timeout(Duration::from_secs(2))
                .await
        }
    });
    waiter.await.expect("waiter task")?;
    println!(
        "id 0 is done after {} rounds ({backend:?})",
        pump.stats().rounds
    );
    Ok(())
}
