//! The loop's `Timeouts` (`Setup::timeouts`, `Run::expired`): a library's many timeouts, kept by
//! the pump, each handed once at its time, with no ordered set or earliest deadline in the
//! binding.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{eventually, within};
use ffi_pump::{LoopHandle, Pump, Run, Timeouts};

/// What the library's timeout callbacks saw: each token, with when it was due and handed.
#[derive(Default)]
struct Fired {
    handed: Vec<(u64, Instant)>,
    runs: usize,
}

/// A library whose timeouts are all it has: `due` says when each token was set to fall due.
fn library(
    idle_stop: bool,
    due: Vec<(u64, Instant)>,
) -> (Pump, LoopHandle<Timeouts>, Arc<Mutex<Fired>>) {
    let fired = Arc::new(Mutex::new(Fired::default()));
    let seen = fired.clone();
    let (pump, handle) = Pump::builder()
        .idle_stop(idle_stop)
        .build_with_state(
            move |setup| {
                let timeouts = setup.timeouts();
                for (token, at) in due {
                    timeouts.set(token, at);
                }
                Ok(timeouts)
            },
            move |_, run| {
                let now = Instant::now();
                let mut fired = seen.lock().expect("not poisoned");
                fired.runs += 1;
                fired.handed.extend(run.expired().map(|token| (token, now)));
                None
            },
        )
        .expect("pump thread starts");
    (pump, handle, fired)
}

/// A library whose state is its timeouts, run by `run_once`.
fn loop_of_timeouts(
    run_once: impl FnMut(&mut Timeouts, &Run<'_>) -> Option<Instant> + Send + 'static,
) -> (Pump, LoopHandle<Timeouts>) {
    Pump::builder()
        .build_with_state(|setup| Ok(setup.timeouts()), run_once)
        .expect("pump thread starts")
}

#[test]
fn a_thousand_timeouts_are_each_handed_once_never_early_and_earliest_first() {
    let start = Instant::now() + Duration::from_millis(20);
    // Spread over 200 ms, in no order (a fixed permutation), some sharing an instant.
    let due: Vec<(u64, Instant)> = (0..1_000_u64)
        .map(|token| {
            (
                token,
                start + Duration::from_micros((token * 7_919) % 200_000),
            )
        })
        .collect();
    let (pump, _handle, fired) = library(true, due.clone());
    futures_lite::future::block_on(within("every timeout is handed", async {
        let all = fired.clone();
        pump.wait_until(move || all.lock().expect("not poisoned").handed.len() >= 1_000)
            .await
            .expect("open");
    }));
    let fired = fired.lock().expect("not poisoned");
    let mut tokens: Vec<u64> = fired.handed.iter().map(|&(token, _)| token).collect();
    let in_order: Vec<Instant> = tokens.iter().map(|&token| due[token as usize].1).collect();
    assert!(
        in_order.windows(2).all(|pair| pair[0] <= pair[1]),
        "handed earliest first"
    );
    for &(token, at) in &fired.handed {
        assert!(at >= due[token as usize].1, "token {token} handed early");
    }
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 1_000, "each once");
    // One run per instant at most, and a few more (the wait's first, wake-ups that found
    // nothing due yet): not a loop run again and again.
    assert!(fired.runs < 1_100, "{} runs for 1 000 timeouts", fired.runs);
}

#[test]
fn a_timeout_set_from_another_thread_before_the_first_wakes_the_loop() {
    let far = Instant::now() + Duration::from_secs(3_600);
    let (pump, handle, fired) = library(true, vec![(1, far)]);
    futures_lite::future::block_on(within("the new first timeout is handed", async {
        let timeouts = handle
            .call(|timeouts| timeouts.clone())
            .await
            .expect("open");
        let waiting = {
            let fired = fired.clone();
            pump.wait_until(move || {
                let handed = &fired.lock().expect("not poisoned").handed;
                handed.iter().any(|&(token, _)| token == 2)
            })
        };
        let set_at = Instant::now();
        std::thread::spawn(move || timeouts.set(2, set_at + Duration::from_millis(30)))
            .join()
            .expect("set");
        waiting.await.expect("open");
        let handed = fired.lock().expect("not poisoned").handed.clone();
        assert_eq!(handed.len(), 1, "only the one due: {handed:?}");
        assert!(
            handed[0].1 >= set_at + Duration::from_millis(30),
            "not before its time"
        );
    }));
}

#[test]
fn a_removed_timeout_is_never_handed_and_a_moved_one_comes_at_its_new_time() {
    let soon = Instant::now() + Duration::from_millis(30);
    let (pump, handle, fired) = library(true, vec![(1, soon), (2, soon)]);
    let later = futures_lite::future::block_on(within("the moved timeout is handed", async {
        let later = Instant::now() + Duration::from_millis(150);
        let (removed, still) = handle
            .call(move |timeouts| {
                let removed = timeouts.remove(1);
                timeouts.set(2, later);
                (removed, timeouts.contains(2))
            })
            .await
            .expect("open");
        assert!(removed && still);
        let seen = fired.clone();
        pump.wait_until(move || !seen.lock().expect("not poisoned").handed.is_empty())
            .await
            .expect("open");
        later
    }));
    let handed = fired.lock().expect("not poisoned").handed.clone();
    assert_eq!(
        handed.iter().map(|&(token, _)| token).collect::<Vec<_>>(),
        [2]
    );
    assert!(handed[0].1 >= later, "at its new time, not the old one");
}

#[test]
fn timeouts_wake_a_loop_nobody_waits_on_only_without_idle_stop() {
    for idle_stop in [true, false] {
        let soon = Instant::now() + Duration::from_millis(20);
        let (pump, _handle, fired) = library(idle_stop, vec![(1, soon)]);
        let handed = || !fired.lock().expect("not poisoned").handed.is_empty();
        if idle_stop {
            // Nobody waits: the idle rule holds the timeout back a while after it fell due.
            std::thread::sleep(Duration::from_millis(200));
            assert!(!handed(), "handed with nobody waiting");
            // A wait makes it come.
            let seen = fired.clone();
            let waited = pump
                .wait_until(move || !seen.lock().expect("not poisoned").handed.is_empty())
                .timeout(Duration::from_secs(10));
            assert_eq!(futures_lite::future::block_on(waited), Ok(()));
        } else {
            futures_lite::future::block_on(eventually("handed with nobody waiting", handed));
        }
        drop(pump);
    }
}

/// A clone kept past the close (by a C callback, say) is harmless: a timeout set then makes no
/// run and no panic.
#[test]
fn setting_a_timeout_after_the_close_does_nothing() {
    let (pump, handle, fired) = library(false, Vec::new());
    let timeouts =
        futures_lite::future::block_on(handle.call(|timeouts| timeouts.clone())).expect("open");
    pump.close();
    futures_lite::future::block_on(pump.closed()).expect("closed by close()");
    let runs = fired.lock().expect("not poisoned").runs;
    timeouts.set(1, Instant::now());
    assert_eq!(timeouts.len(), 1, "kept, never handed");
    assert_eq!(
        fired.lock().expect("not poisoned").runs,
        runs,
        "no run after the close"
    );
}

/// Found in review: `Run::expired` was the run's list, taken out before `run_once`: a timeout a
/// handler for an earlier one removed (D-Bus's `remove_timeout`, the token then a freed
/// `DBusTimeout *`), or removed and set again for later under the same token, was still handed
/// in that run. Each is taken out as it is handed now.
#[test]
fn a_timeout_removed_or_set_again_by_an_earlier_handler_in_the_run_is_not_handed() {
    let handed = Arc::new(Mutex::new(Vec::new()));
    let seen = handed.clone();
    let (pump, handle) = loop_of_timeouts(move |timeouts, run| {
        for token in run.expired() {
            seen.lock().expect("not poisoned").push(token);
            if token == 1 {
                timeouts.remove(2); // freed by the first one's handler
                                    // Removed and made again, for later.
                timeouts.set(3, Instant::now() + Duration::from_secs(3_600));
            }
        }
        None
    });
    futures_lite::future::block_on(within("the run", async {
        let at = Instant::now();
        handle
            .call(move |timeouts| {
                for token in 1..=3 {
                    timeouts.set(token, at);
                }
            })
            .await
            .expect("open");
        pump.turn().await.expect("open");
        let left = handle
            .call(|timeouts| (timeouts.len(), timeouts.contains(3)))
            .await
            .expect("open");
        assert_eq!(left, (1, true), "3 is set for later, 2 is gone");
    }));
    assert_eq!(*handed.lock().expect("not poisoned"), [1]);
}

/// Found in review: a timeout set on the loop's thread outside a run — by a check the pump runs
/// after its run — was taken for one set in the run, so nothing kicked the loop, which slept
/// past it. Only a run's own sets go without a kick now.
#[test]
fn a_timeout_set_by_a_check_on_the_loops_thread_wakes_the_loop() {
    let (pump, handle, fired) = library(true, Vec::new());
    let timeouts =
        futures_lite::future::block_on(handle.call(|timeouts| timeouts.clone())).expect("open");
    let checks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = fired.clone();
    let waited = pump
        .wait_until(move || {
            // The second check is the pump's, on the loop's thread after its run (the default
            // strategy; the first is the waiting task's own, at its first poll).
            if checks.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                assert_eq!(std::thread::current().name(), Some("ffi-pump-loop"));
                timeouts.set(9, Instant::now() + Duration::from_millis(20));
            }
            !seen.lock().expect("not poisoned").handed.is_empty()
        })
        .timeout(Duration::from_secs(10));
    // The loop said it is idle: a kick, once the wait is pending, makes the run after which
    // the pump checks it.
    let kicked = async {
        common::pending(&pump, 1).await;
        pump.kick();
    };
    let (waited, ()) = futures_lite::future::block_on(futures_lite::future::zip(waited, kicked));
    assert_eq!(waited, Ok(()));
}

/// Found in the second review of `Run::expired`: a run that took only some of what fell due
/// (`.any(..)` stops early) left the rest counted as the first timeout, so a later `set` from
/// another thread never counted as the earliest and kicked nothing, and the loop slept past
/// it; and the next run handed the leftover before one due earlier that was set meanwhile.
#[test]
fn a_run_that_leaves_timeouts_untaken_misses_no_later_one_and_keeps_their_order() {
    let handed = Arc::new(Mutex::new(Vec::new()));
    let seen = handed.clone();
    let (pump, handle) = loop_of_timeouts(move |_, run| {
        // Takes the first one only, as `.any(..)` would when it found what it wanted.
        seen.lock()
            .expect("not poisoned")
            .extend(run.expired().next());
        None
    });
    futures_lite::future::block_on(within("the timeouts", async {
        let timeouts = handle
            .call(|timeouts| timeouts.clone())
            .await
            .expect("open");
        let t0 = Instant::now() - Duration::from_millis(10);
        // Set in a call, so its run is the first to look: both due, it takes 1 and leaves 2.
        let call = handle.call(move |timeouts| {
            timeouts.set(1, t0);
            timeouts.set(2, t0 + Duration::from_millis(2));
        });
        call.await.expect("open");
        // Due before 2: the next run takes it first.
        let call = handle.call(move |timeouts| timeouts.set(3, t0 + Duration::from_millis(1)));
        call.await.expect("open");
        // Read on the loop's thread, as the next run begins: after the last one's handing.
        let read = handed.clone();
        let so_far = handle.call(move |_| read.lock().expect("not poisoned").clone());
        assert_eq!(so_far.await.expect("open"), [1, 3]);
        // Set from another thread: the earliest still to come, whatever was left untaken.
        let soon = Instant::now() + Duration::from_millis(30);
        std::thread::spawn(move || timeouts.set(4, soon))
            .join()
            .expect("set");
        let seen = handed.clone();
        pump.wait_until(move || seen.lock().expect("not poisoned").contains(&4))
            .await
            .expect("open");
    }));
    assert_eq!(*handed.lock().expect("not poisoned"), [1, 3, 2, 4]);
}
