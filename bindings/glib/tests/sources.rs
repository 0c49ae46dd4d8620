//! GLib sources through ffi-pump: each fires once, each wait sees it, the context is never
//! iterated twice at once.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ffi_pump::Error;
use ffi_pump_glib::Sources;

#[test]
fn a_thousand_timeouts_fire_once_each_and_are_seen() {
    const SOURCES: u32 = 1_000;
    let sources = Arc::new(Sources::new(SOURCES).expect("pump thread"));
    smol::block_on(async {
        let tasks: Vec<_> = (0..SOURCES)
            .map(|id| {
                let sources = sources.clone();
                let delay = if id == 0 {
                    Duration::ZERO
                } else {
                    Duration::from_millis(fastrand::u64(1..200))
                };
                smol::spawn(async move {
                    sources.add(id, delay);
                    sources.fired(id, Duration::from_secs(10)).await
                })
            })
            .collect();
        for (id, task) in (0..).zip(tasks) {
            task.await
                .unwrap_or_else(|err| panic!("source {id}: {err}"));
        }
    });
    for id in 0..SOURCES {
        assert_eq!(
            sources.fires(id),
            1,
            "source {id} fired {} times",
            sources.fires(id)
        );
    }
    let counters = sources.counters();
    assert_eq!(
        counters.overlaps.load(Ordering::SeqCst),
        0,
        "iterations overlapped"
    );
    assert_eq!(
        counters.acquire_failures.load(Ordering::SeqCst),
        0,
        "the context had another owner"
    );
    assert_eq!(
        counters.iterations.load(Ordering::SeqCst),
        sources.pump().stats().rounds
    );
}

#[test]
fn a_source_that_never_fires_times_out() {
    let sources = Sources::new(1).expect("pump thread");
    sources.add(0, Duration::from_secs(3600));
    let outcome = smol::block_on(sources.fired(0, Duration::from_millis(50)));
    assert_eq!(outcome, Err(Error::TimedOut));
}
