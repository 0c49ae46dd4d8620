//! A `submit` whose `start` panics, awaited at every moment around the panic: found in review,
//! the wait looked for the panic before its waker was in the table, and a panic kept between
//! the two woke another waker — the wait then stayed pending until its timeout (36 times in
//! 200 000). A file of its own: it silences the panic hook, which is the process's.

use std::time::{Duration, Instant};

use ffi_pump::{Completions, Pump};

#[test]
fn a_submits_start_panic_is_never_missed() {
    std::panic::set_hook(Box::new(|_| {}));
    let (_pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    let table = Completions::<u32, u32>::new();
    let mut late = 0;
    for key in 0..20_000 {
        let wait = handle
            .submit(&table, key, |_| panic!("a start that panics"), |_| {})
            .timeout(Duration::from_secs(1));
        // The first poll swept across the moment the loop's thread runs `start`.
        let spin = Duration::from_nanos(u64::from(key % 400) * 100);
        let swept = Instant::now();
        while swept.elapsed() < spin {
            std::hint::spin_loop();
        }
        let polled = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            futures_lite::future::block_on(wait)
        }));
        assert!(outcome.is_err(), "the panic is resumed");
        if polled.elapsed() >= Duration::from_millis(500) {
            late += 1;
        }
    }
    let _ = std::panic::take_hook();
    assert_eq!(late, 0, "waits that missed the panic's wake");
}

/// Found in review: polled again after it resumed its start's panic (a caught panic, a select
/// loop), the wait put itself back in the table under a key no longer its, and kept the key
/// from every later submit (`KeyInUse`). It panics as a completed future does now.
#[test]
fn a_wait_polled_again_after_its_starts_panic_panics_and_leaves_its_key_free() {
    use futures_lite::future::{block_on, poll_once};
    use std::panic::{catch_unwind, AssertUnwindSafe};
    std::panic::set_hook(Box::new(|_| {}));
    let (_pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    let table = Completions::<u32, u32>::new();
    let mut wait = handle.submit(&table, 1, |_| panic!("a start that panics"), |_| {});
    block_on(handle.call(|_| ())).expect("start ran");
    let first = catch_unwind(AssertUnwindSafe(|| block_on(poll_once(&mut wait))));
    assert!(first.is_err(), "the start's panic");
    let again = catch_unwind(AssertUnwindSafe(|| block_on(poll_once(&mut wait))));
    let message = again.expect_err("polled after it completed");
    let message = message.downcast_ref::<&str>().copied();
    assert_eq!(message, Some("a wait future was polled after it completed"));
    drop(wait);
    block_on(handle.call(|_| ())).expect("its cancel hook ran");
    let next = handle.submit(&table, 1, |_| {}, |_| {});
    table.complete(1, 7);
    assert_eq!(
        block_on(next.timeout(Duration::from_secs(5))),
        Ok(7),
        "the key is free"
    );
}
