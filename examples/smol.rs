//! The smol path: enable the `smol` feature (the default), spawn the pump detached, await a
//! status with a timeout.
//!
//! Run it with:
//!
//! ```text
//! cargo run --example smol
//! ```
use std::sync::Arc;
use std::time::Duration;

use fake_loop::FakeLoop;
use ffi_pump::{Backend, Pump};

fn main() -> Result<(), ffi_pump::Error> {
    smol::block_on(async {
        let fx = Arc::new(FakeLoop::new(1));
        let run_fx = fx.clone();
        let pump = Pump::new(move || run_fx.run_once().expect("not re-entered"));
        pump.spawn_on(Backend::Smol)?;

        fx.arm_in(0, Duration::from_millis(20));
        let check = fx.clone();
        pump.wait_until(move || check.check(0))
            .timeout(Duration::from_secs(2))
            .await?;
        println!("id 0 is done after {} rounds (smol)", pump.stats().rounds);
        Ok(())
    })
}
