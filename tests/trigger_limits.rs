//! The readiness trigger at the limit of descriptors. It lowers this process's `RLIMIT_NOFILE`
//! and opens every number left, which would fail any test beside it: this file holds this one
//! test.
#![cfg(all(target_os = "linux", feature = "tokio"))]

mod common;

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ffi_pump::Error;
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Found in review: a driver that takes over once the library closed its descriptor duplicates
/// the trigger past the library's number; with the library's number the last below the limit,
/// and every other taken, the duplicate fell back to the lowest free number — the library's —
/// where the check found the very file it looked for, and the pump ran 1.4 million times in 5 s.
#[test]
fn a_driver_taking_over_at_the_limit_after_the_library_closed_its_descriptor_stops_the_pump() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (read, write) = rustix::pipe::pipe().expect("pipe");
    // The library's descriptor, high up: it will be the last number below the limit.
    let high = common::highest_open_fd() + 64;
    let read: OwnedFd = rustix::io::fcntl_dupfd_cloexec(&read, high).expect("dup high");
    assert_eq!(read.as_raw_fd(), high);
    let runs = Arc::new(AtomicU64::new(0));
    let saved = getrlimit(Resource::Nofile);
    let outcome = rt.block_on(async {
        let (pump, first, standby) = common::pump_with_a_standby_driver(&read, true, &runs).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The limit just past the library's descriptor, every number below it in use (the
        // pump's own duplicates sit past it already: the limit does not close them).
        let limit = Rlimit {
            current: Some(high as u64 + 1),
            maximum: saved.maximum,
        };
        setrlimit(Resource::Nofile, limit).expect("setrlimit");
        let mut fillers = Vec::new();
        while let Ok(file) = std::fs::File::open("/dev/null") {
            fillers.push(file);
        }
        drop(read); // the library closes its descriptor: the only free number is its own
        first.abort();
        let _ = first.await; // the standby driver takes over, and duplicates for tokio
        let turned = pump.turn().await;
        drop(fillers);
        setrlimit(Resource::Nofile, saved).expect("limit restored");
        turned.expect("the standby driver runs it");
        common::wait_after_a_write(&pump, &write, standby).await
    });
    let runs = runs.load(Ordering::SeqCst);
    assert!(
        matches!(outcome, Err(Error::Trigger(_))) && runs < 50,
        "{outcome:?} after {runs} runs"
    );
}
