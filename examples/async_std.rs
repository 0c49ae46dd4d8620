//! The async-std path: enable the `async-std` feature, spawn the pump detached, await a status
//! with a timeout.
//!
//! Run it with:
//!
//! ```text
//! cargo run --example async_std --features async-std
//! ```
use std::sync::Arc;
use std::time::Duration;

use fake_loop::FakeLoop;
use ffi_pump::{Backend, Pump};

fn main() -> Result<(), ffi_pump::Error> {
    async_std::task::block_on(async {
        let fx = Arc::new(FakeLoop::new(1));
        let run_fx = fx.clone();
        let pump = Pump::new(move || run_fx.run_once().expect("not re-entered"));
        pump.spawn_on(Backend::AsyncStd)?;

        fx.arm_in(0, Duration::from_millis(20));
        let check = fx.clone();
        let waiter = async_std::task::spawn({
            let pump = pump.clone();
            async move {
                pump.wait_until(move || check.check(0))
                    .timeout(Duration::from_secs(2))
                    .await
            }
        });
        waiter.await?;
        println!(
            "id 0 is done after {} rounds (async-std)",
            pump.stats().rounds
        );
        Ok(())
    })
}
