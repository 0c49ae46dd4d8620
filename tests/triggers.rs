//! What turns the pump besides its interval: kicks, descriptor readiness, and deadline hints.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use async_io::Timer;
use common::{assert_clean, eventually, pending, Rt};
use fake_loop::{now_ns, FakeLoop};
use ffi_pump::{Builder, Error, Pump};

const HOUR: Duration = Duration::from_secs(3600);

/// The fixture's next deadline as an `Instant`.
fn next_deadline(fx: &FakeLoop) -> Option<Instant> {
    let at = fx.next_deadline_ns()?;
    Some(Instant::now() + Duration::from_nanos(at.saturating_sub(now_ns())))
}

/// A pump on `rt` whose loop is iterated `run_once` and told when the fixture next has work.
fn hinted_pump(rt: Rt, fx: &Arc<FakeLoop>) -> Pump {
    hinted_pump_seen(rt, fx, &Arc::default())
}

/// Where a hinted pump's loop was made, and where each of its runs ran.
#[derive(Debug, Default)]
struct LoopThreads {
    made_on: Option<ThreadId>,
    ran_on: Vec<ThreadId>,
}

/// [`hinted_pump`], recording in `threads` where its loop lives: on `Rt::LoopThread`, on the
/// pump's own thread (`Builder::build_with_state`); elsewhere, made here and run by whoever
/// drives the pump future spawned on `rt`'s backend.
fn hinted_pump_seen(rt: Rt, fx: &Arc<FakeLoop>, threads: &Arc<Mutex<LoopThreads>>) -> Pump {
    let (fx, ran) = (fx.clone(), threads.clone());
    let run_once = move || {
        ran.lock().unwrap().ran_on.push(thread::current().id());
        fx.run_once().expect("not re-entered");
        next_deadline(&fx)
    };
    if rt == Rt::LoopThread {
        let made = threads.clone();
        let (pump, _handle) = Builder::new()
            .build_with_state(
                move |_| {
                    made.lock().unwrap().made_on = Some(thread::current().id());
                    Ok(())
                },
                move |_: &mut (), _| run_once(),
            )
            .expect("pump thread starts");
        return pump;
    }
    threads.lock().unwrap().made_on = Some(thread::current().id());
    let pump = Builder::new().build(run_once).expect("valid settings");
    pump.spawn_on(rt.backend()).expect("backend available");
    pump
}

on_every_backend! {
    // Found by a hostile probe: after one slow run (or a stalled executor) the interval timer
    // made up every tick it missed, back to back — 105 runs in the 30 ms after a 500 ms run at a
    // 5 ms interval, and 321 after a runtime blocked for 300 ms at 1 ms.
    fn a_slow_run_is_not_followed_by_a_burst_of_the_ticks_it_missed(rt: Rt) {
        const SLOW: Duration = Duration::from_millis(300);
        let starts = Arc::new(Mutex::new(Vec::<Instant>::new()));
        let log = starts.clone();
        rt.block_on(async {
            let builder = Pump::builder().interval(Duration::from_millis(5));
            let pump = rt.pump_with(builder, move || {
                let mut log = log.lock().expect("one run at a time");
                log.push(Instant::now());
                if log.len() == 4 {
                    drop(log);
                    thread::sleep(SLOW);
                }
            });
            let waited = pump.wait_until(|| false).timeout(SLOW + Duration::from_millis(300));
            assert_eq!(waited.await, Err(Error::TimedOut));
        });
        let starts = starts.lock().expect("runs ended").clone();
        assert!(starts.len() > 4, "{} runs", starts.len());
        let slow_end = starts[3] + SLOW;
        let burst = starts
            .iter()
            .filter(|&&at| at >= slow_end && at < slow_end + Duration::from_millis(30))
            .count();
        assert!(burst <= 15, "{burst} runs in the 30 ms after a slow run, at a 5 ms interval");
    }

    fn a_kick_while_idle_runs_the_loop_once(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().interval(HOUR), &fx);
            pump.kick();
            let probe = fx.clone();
            eventually("the kicked run", || probe.stats().calls == 1).await;
            Timer::after(Duration::from_millis(20)).await;
            assert_eq!(fx.stats().calls, 1, "an idle pump ran again without a kick");
        });
    }

    fn a_kick_while_the_timer_sleeps_runs_at_once(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder().interval(HOUR), &fx);
            let waiting = rt.spawn({
                let (pump, fx) = (pump.clone(), fx.clone());
                async move { pump.wait_until(move || fx.check(0)).timeout(Duration::from_secs(10)).await }
            });
            pending(&pump, 1).await;
            fx.arm_in(0, Duration::ZERO);
            let kicked = Instant::now();
            pump.kick();
            // The timer would run the loop in an hour: only the kick's run ends the wait.
            let outcome = waiting.await;
            let took = kicked.elapsed();
            assert_eq!(outcome, Ok(()), "the wait after a kick ended so, {took:?} after the kick");
            assert!(took < Duration::from_secs(1), "the kicked run came {took:?} after the kick");
        });
    }

    fn a_burst_of_kicks_during_a_run_causes_exactly_one_more_run(rt: Rt) {
        let (started_tx, started) = async_channel::bounded::<()>(1);
        let (release, released) = async_channel::bounded::<()>(1);
        let first = Arc::new(AtomicBool::new(true));
        rt.block_on(async {
            let fx = Arc::new(FakeLoop::new(1));
            let run_fx = fx.clone();
            let pump = rt.pump_with(Pump::builder().interval(HOUR), move || {
                if first.swap(false, Ordering::SeqCst) {
                    // Hold the first run open until the test has kicked.
                    started_tx.send_blocking(()).expect("test listening");
                    released.recv_blocking().expect("test releases");
                }
                run_fx.run_once().expect("not re-entered");
            });
            pump.kick();
            started.recv().await.expect("the first run started");
            for _ in 0..3 {
                pump.kick();
            }
            release.send(()).await.expect("release the run");
            let probe = fx.clone();
            eventually("the run after the kicks", || probe.stats().calls == 2).await;
            Timer::after(Duration::from_millis(20)).await;
            assert_eq!(fx.stats().calls, 2, "a burst of kicks made more than one extra run");
            assert_eq!(pump.stats().rounds, 2);
        });
    }

    fn a_wait_that_found_the_loop_lock_busy_needs_no_further_run(rt: Rt) {
        // Regression, found by tests/loom.rs: a wait whose first poll found the loop lock held
        // (here by another wait's slow check) waited for the next run to evaluate it; a hinted
        // pump with nothing due makes no run, so it waited until its timeout.
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = hinted_pump(rt, &fx);
            fx.arm_at(0, now_ns());
            pump.turn().await.expect("the run that makes id 0 ready");
            assert!(fx.check(0));
            let (entered, inside) = async_channel::bounded::<()>(1);
            let slow = {
                let pump = pump.clone();
                rt.spawn(async move {
                    pump.wait_until(move || {
                        let _ = entered.try_send(());
                        // A slow check holding the loop lock (as a slow C call would).
                        std::thread::sleep(Duration::from_millis(200));
                        false
                    })
                    .timeout(Duration::from_millis(500))
                    .await
                })
            };
            inside.recv().await.expect("the slow check started");
            let started = Instant::now();
            let probe = fx.clone();
            let ready = pump
                .wait_until(move || probe.check(0))
                .timeout(Duration::from_secs(5))
                .await;
            assert_eq!(ready, Ok(()));
            let elapsed = started.elapsed();
            assert!(elapsed < Duration::from_secs(2), "the ready wait took {elapsed:?}");
            assert_eq!(slow.await, Err(Error::TimedOut));
            assert_eq!(fx.stats().calls, 1, "no run besides the turn was needed");
            assert_clean(&fx);
        });
    }
}

/// The readiness trigger takes a Unix descriptor (the fixture's is a timerfd: Linux).
#[cfg(unix)]
mod readiness {
    use super::*;
    use common::calls_and_rounds;
    use std::sync::atomic::AtomicU64;

    on_every_backend! {
    fn a_descriptor_closed_by_the_library_stops_the_pump_with_an_error(rt: Rt) {
        let runs = Arc::new(AtomicU64::new(0));
        let counter = runs.clone();
        let outcome = rt.block_on(common::wait_while_the_library_closes_its_descriptor(
            rt,
            |builder| builder,
            move || {
                counter.fetch_add(1, Ordering::SeqCst);
            },
        ));
        assert!(matches!(outcome, Err(Error::Trigger(_))), "got {outcome:?}");
        let runs = runs.load(Ordering::SeqCst);
        assert!(runs < 50, "the pump spun on the closed descriptor: {runs} runs");
    }

    // Found by a hostile probe: the library's eventfd, signalled, closed and a new one made
    // under the same number (as a library that starts again would). Every eventfd
    // shares one inode, so the look-up by device and inode took the new one for the old, and
    // the pump ran 200 000 times a second on its duplicate of the old one, left readable.
    fn an_eventfd_replaced_under_its_number_stops_the_pump_with_an_error(rt: Rt) {
        use rustix::event::{eventfd, EventfdFlags};
        let flags = EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK;
        let mut library = eventfd(0, flags).expect("eventfd");
        let runs = Arc::new(AtomicU64::new(0));
        let counter = runs.clone();
        let outcome = rt.block_on(async {
            let builder = Pump::builder().interval(Duration::MAX).run_on_readable(&library);
            let pump = rt.pump_with(builder, move || {
                counter.fetch_add(1, Ordering::SeqCst);
            });
            pump.turn().await.expect("open");
            // Closed, and its number taken by a new eventfd, in one step; then the old one is
            // signalled (through a duplicate the library kept), never to be read. Signalled
            // first, it would turn the pump legitimately until the replacement: on a loaded
            // machine that window held 200 runs.
            let old = rustix::io::dup(&library).expect("dup");
            let replacement = eventfd(0, flags).expect("eventfd");
            rustix::io::dup2(&replacement, &mut library).expect("dup2");
            rustix::io::write(&old, &1_u64.to_ne_bytes()).expect("signalled");
            pump.wait_until(|| false).timeout(common::HANG).await
        });
        assert!(matches!(outcome, Err(Error::Trigger(_))), "got {outcome:?}");
        let runs = runs.load(Ordering::SeqCst);
        assert!(runs < 50, "the pump spun on the replaced descriptor: {runs} runs");
    }

    fn readiness_turns_the_pump_long_before_its_timer(rt: Rt) {
        const IDS: u32 = 200;
        let fx = Arc::new(FakeLoop::new(IDS));
        rt.block_on(async {
            let fd = fx.ready_fd().expect("the fixture's ready descriptor");
            let builder = Pump::builder().interval(Duration::from_secs(1)).run_on_readable(fd);
            let started = Instant::now();
            let pump = rt.pump(builder, &fx);
            let deadlines: Vec<Duration> =
                (0..IDS).map(|_| Duration::from_millis(fastrand::u64(5..100))).collect();
            let tasks: Vec<_> = (0..IDS)
                .map(|id| {
                    let (pump, fx) = (pump.clone(), fx.clone());
                    rt.spawn(async move { pump.wait_until(move || fx.check(id)).timeout(Duration::from_secs(10)).await })
                })
                .collect();
            for (id, delay) in (0..).zip(&deadlines) {
                fx.arm_in(id, *delay);
            }
            for task in tasks {
                assert_eq!(task.await, Ok(()));
            }
            // With only the 1 s timer, the first id could not be seen before 1 s.
            let elapsed = started.elapsed();
            assert!(elapsed < Duration::from_millis(900), "readiness did not turn the pump: {elapsed:?}");
            let (calls, rounds) = calls_and_rounds(&pump, &fx).await;
            assert_eq!(calls, rounds);
            assert_clean(&fx);
        });
    }
    }
}

#[cfg(feature = "smol")]
#[test]
fn a_hinted_pump_makes_no_runs_while_nothing_is_due() {
    let fx = Arc::new(FakeLoop::new(50));
    smol::block_on(async {
        let pump = hinted_pump(Rt::Smol, &fx);
        let tasks: Vec<_> = (0..50)
            .map(|id| {
                let (pump, fx) = (pump.clone(), fx.clone());
                smol::spawn(async move {
                    pump.wait_until(move || fx.check(id))
                        .timeout(Duration::from_secs(10))
                        .await
                })
            })
            .collect();
        pending(&pump, 50).await;
        // One run to hear from the library, then none while nothing is due.
        let probe = fx.clone();
        eventually("the first run", || probe.stats().calls == 1).await;
        Timer::after(Duration::from_millis(200)).await;
        assert_eq!(fx.stats().calls, 1, "runs while nothing was due");
        // Submit work, and tell the pump: from now on it runs when the library says so.
        for id in 0..50 {
            fx.arm_in(id, Duration::from_millis(fastrand::u64(10..100)));
        }
        pump.kick();
        for task in tasks {
            assert_eq!(task.await, Ok(()));
        }
        let calls = fx.stats().calls;
        // The first run, the kicked run, and one per deadline at most (deadlines that share a
        // run share it).
        assert!((3..=52).contains(&calls), "{calls} runs for 50 deadlines");
        assert_clean(&fx);
    });
}

#[test]
fn a_hinted_pump_runs_at_its_deadline_on_a_pump_thread() {
    let rt = Rt::LoopThread;
    let fx = Arc::new(FakeLoop::new(1));
    let threads = Arc::new(Mutex::new(LoopThreads::default()));
    rt.block_on(async {
        let pump = hinted_pump_seen(rt, &fx, &threads);
        const DELAY: Duration = Duration::from_millis(30);
        let armed = Instant::now();
        fx.arm_in(0, DELAY);
        pump.kick();
        let check = fx.clone();
        pump.wait_until(move || check.check(0))
            .timeout(Duration::from_secs(10))
            .await
            .expect("the deadline run");
        let took = armed.elapsed();
        assert!(
            took >= DELAY,
            "id 0 was ready {took:?} after arming, before its deadline"
        );
        // Nothing ticks: without a run at the deadline, the wait would wait for its timeout.
        assert!(
            took < Duration::from_secs(2),
            "the deadline run came {took:?} after arming"
        );
        let calls = fx.stats().calls;
        assert!(calls <= 3, "{calls} runs for one deadline");
    });
    let threads = threads.lock().unwrap();
    let made_on = threads.made_on.expect("the loop was made");
    assert_ne!(
        made_on,
        thread::current().id(),
        "the loop was made on the test's thread"
    );
    assert!(
        threads.ran_on.iter().all(|&ran_on| ran_on == made_on),
        "runs on {:?}, not all on the loop's thread {made_on:?}",
        threads.ran_on
    );
}

on_every_backend! {
    fn issue_15_a_panicking_local_check_still_evaluates_the_waits_that_arrived_meanwhile(rt: Rt) {
        // Regression (#15, defect 3): a check run by its waiting task that panicked let go of the
        // loop lock while unwinding, without evaluating the pump-evaluated waits that had
        // registered while it held the lock; on a hinted pump with nothing due they waited for
        // a run that never came.
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = hinted_pump(rt, &fx);
            fx.arm_at(0, now_ns());
            pump.turn().await.expect("the run that makes id 0 ready");
            let (entered, inside) = async_channel::bounded::<()>(1);
            let release = Arc::new(AtomicBool::new(false));
            let panicking = std::thread::spawn({
                let (pump, release) = (pump.clone(), release.clone());
                move || {
                    let wait = pump.wait_until_local(move || {
                        let _ = entered.try_send(());
                        while !release.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        panic!("a check failing on purpose");
                    });
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        futures_lite::future::block_on(wait)
                    }))
                    .is_err()
                }
            });
            inside.recv().await.expect("the local check holds the loop lock");
            let ready = rt.spawn({
                let (pump, fx) = (pump.clone(), fx.clone());
                async move { pump.wait_until(move || fx.check(0)).timeout(Duration::from_secs(5)).await }
            });
            // The local wait, holding the loop lock in its check, and the ready one.
            pending(&pump, 2).await;
            release.store(true, Ordering::SeqCst);
            let started = Instant::now();
            assert!(panicking.join().expect("the thread ends"), "the local check panicked");
            assert_eq!(ready.await, Ok(()));
            let elapsed = started.elapsed();
            assert!(elapsed < Duration::from_secs(2), "the ready wait took {elapsed:?}");
            assert_eq!(fx.stats().calls, 1, "no run besides the turn was needed");
        });
    }
}

on_every_backend! {
    fn a_hinted_pump_goes_on_with_an_evaluation_its_budget_cut_short(rt: Rt) {
        // Regression: after a run, the checks get their budget; the rest waited for the next
        // run. A pump that reports deadlines has no next tick, so 1 745 of 2 000 waits whose
        // ids were ready stayed asleep until their timeouts. Then the pump kicked itself: a C
        // run for each cut pass. Now the rest goes on with no run at all.
        const IDS: u32 = 1_000;
        let fx = Arc::new(FakeLoop::new(IDS));
        rt.block_on(async {
            let pump = hinted_pump(rt, &fx);
            let tasks: Vec<_> = (0..IDS)
                .map(|id| {
                    let (pump, fx) = (pump.clone(), fx.clone());
                    rt.spawn(async move {
                        pump.wait_until(move || {
                            // A check slow enough that 256 of them overrun the budget.
                            let started = Instant::now();
                            while started.elapsed() < Duration::from_micros(5) {}
                            fx.check(id)
                        })
                        .timeout(Duration::from_secs(10))
                        .await
                    })
                })
                .collect();
            pending(&pump, IDS as usize).await;
            let started = Instant::now();
            // One deadline for all: a single run readies every id.
            let due = fake_loop::now_ns() + 20_000_000;
            for id in 0..IDS {
                fx.arm_at(id, due);
            }
            let runs_before = fx.stats().calls;
            pump.kick();
            for task in tasks {
                assert_eq!(task.await, Ok(()));
            }
            let elapsed = started.elapsed();
            assert!(elapsed < Duration::from_secs(5), "the waits took {elapsed:?}");
            // The kick's run hears the deadline, the deadline's run readies every id; the
            // checks the budget cut (1 000 × 5 µs against 500 µs) need no run of their own.
            let runs = fx.stats().calls - runs_before;
            assert!(runs <= 3, "{runs} runs for 1 000 checks over their budget");
        });
    }
}

#[test]
fn a_turn_returns_with_every_check_of_its_round_done_even_past_the_budget() {
    // Regression: a turn returned after the round's first pass. When the checks overran their
    // budget (or the thread was stopped for longer: a busy machine is enough), the rest went on
    // in the driver after the turn had returned, and a wait whose condition held at the run
    // could still be pending once `turn().await` was done (criterion's `wait life` bench failed
    // so on a loaded machine). Now the turn finishes the round itself.
    const WAITS: usize = 1_000;
    let done: Arc<Vec<AtomicBool>> = Arc::new((0..WAITS).map(|_| AtomicBool::new(false)).collect());
    let pump = common::turned_only();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    for life in 0..3 {
        done.iter()
            .for_each(|flag| flag.store(false, Ordering::SeqCst));
        let mut waits: Vec<_> = (0..WAITS)
            .map(|id| {
                let done = done.clone();
                Box::pin(pump.wait_until(move || {
                    // Slow enough that a round's checks (1 000 × 5 µs) overrun the 500 µs budget.
                    let started = Instant::now();
                    while started.elapsed() < Duration::from_micros(5) {}
                    done[id].load(Ordering::SeqCst)
                }))
            })
            .collect();
        for wait in &mut waits {
            assert!(std::future::Future::poll(wait.as_mut(), &mut cx).is_pending());
        }
        done.iter()
            .for_each(|flag| flag.store(true, Ordering::SeqCst));
        futures_lite::future::block_on(common::within("a turn", pump.turn())).expect("a turn");
        for (id, wait) in waits.iter_mut().enumerate() {
            let polled = std::future::Future::poll(wait.as_mut(), &mut cx);
            assert!(
                matches!(polled, std::task::Poll::Ready(Ok(()))),
                "life {life}: wait {id} is {polled:?} after the turn"
            );
        }
    }
    pump.close();
}

on_every_backend! {
    fn run_once_says_what_wakes_it_run_by_run(rt: Rt) {
        rt.block_on(async {
            let runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
            let counted = runs.clone();
            // Ticks while it has work in flight (its first four runs), then only on demand.
            let pump = Pump::builder()
                .interval(Duration::from_millis(1))
                .build(move || {
                    let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    if n < 5 { ffi_pump::Next::Tick } else { ffi_pump::Next::Idle }
                })
                .expect("valid settings");
            pump.spawn_on(rt.backend()).expect("backend available");
            let outcome = pump.wait_until(|| false).timeout(Duration::from_millis(300)).await;
            assert_eq!(outcome, Err(ffi_pump::Error::TimedOut));
            assert_eq!(
                runs.load(std::sync::atomic::Ordering::SeqCst),
                5,
                "four ticked runs after the first, then none until asked"
            );
            pump.kick();
            let probe = runs.clone();
            eventually("a kick still runs it", || {
                probe.load(std::sync::atomic::Ordering::SeqCst) == 6
            })
            .await;
        });
    }
}

/// A loop on its own thread whose `run_once` returns `()` ticks at the interval while a wait is
/// pending (it returned `Some(Instant::now() + period)` for that before).
#[test]
fn a_loop_on_its_thread_returning_nothing_ticks() {
    futures_lite::future::block_on(async {
        let (pump, handle) = Pump::builder()
            .interval(Duration::from_millis(1))
            .build_with_state(|_| Ok(0_u32), |runs, _| *runs += 1)
            .expect("a ticked loop takes an interval");
        let outcome = pump
            .wait_until(|| false)
            .timeout(Duration::from_millis(200))
            .await;
        assert_eq!(outcome, Err(ffi_pump::Error::TimedOut));
        let runs = handle.call(|runs| *runs).await.expect("the call runs");
        assert!(runs >= 10, "{runs} runs in 200 ms at a 1 ms interval");
    });
}

/// A pump at a 5 ms interval whose `run_once` says what `next` holds (at first `first`), and
/// the count of its runs.
fn scripted_pump(
    first: ffi_pump::Next,
) -> (
    Pump,
    Arc<Mutex<ffi_pump::Next>>,
    Arc<std::sync::atomic::AtomicU32>,
) {
    let next = Arc::new(Mutex::new(first));
    let runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let (says, counted) = (next.clone(), runs.clone());
    let pump = Pump::builder()
        .interval(Duration::from_millis(5))
        .build(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            *says.lock().unwrap()
        })
        .expect("valid settings");
    (pump, next, runs)
}

// Found by a hostile probe: what a run made by `turn()` said about the next run (a deadline,
// ticks, nothing due) reached the driver only when something else woke it, so with a wait
// pending the deadline got no run and a wait on it timed out, ticks never started, and a
// deadline taken back still ran.
on_every_backend! {
    fn what_a_turns_run_says_about_the_next_run_is_heeded(rt: Rt) {
        if rt == Rt::LoopThread {
            return; // `turn()` there asks the loop's thread, whose driver made the run
        }
        rt.block_on(async {
            let (pump, next, runs) = scripted_pump(ffi_pump::Next::Idle);
            pump.spawn_on(rt.backend()).expect("backend available");
            let waiting = pump.clone();
            let _pending = rt.spawn(async move { waiting.wait_until(|| false).timeout(HOUR).await });
            pending(&pump, 1).await;
            pump.turn().await.expect("a turn"); // heard: nothing due
            let at = Instant::now() + Duration::from_millis(50);
            *next.lock().unwrap() = ffi_pump::Next::At(at);
            pump.turn().await.expect("a turn");
            let after = runs.load(Ordering::SeqCst);
            let runs_seen = runs.clone();
            eventually("a run at the deadline the turn's run said", || {
                runs_seen.load(Ordering::SeqCst) > after
            })
            .await;
            assert!(Instant::now() >= at, "not before it");
            *next.lock().unwrap() = ffi_pump::Next::Tick;
            pump.turn().await.expect("a turn");
            let after = runs.load(Ordering::SeqCst);
            let runs_seen = runs.clone();
            eventually("ticks, as the turn's run said", || {
                runs_seen.load(Ordering::SeqCst) >= after + 3
            })
            .await;
            *next.lock().unwrap() = ffi_pump::Next::At(Instant::now() + Duration::from_millis(100));
            pump.turn().await.expect("a turn"); // the next run says nothing is due: ticks stop
            *next.lock().unwrap() = ffi_pump::Next::Idle;
            pump.turn().await.expect("a turn");
            let after = runs.load(Ordering::SeqCst);
            Timer::after(Duration::from_millis(300)).await;
            assert_eq!(runs.load(Ordering::SeqCst), after, "nothing due: no run");
            pump.close();
        });
    }
}

// The driver sleeps on a timer armed for what the last run it knew of said. A turn's run that
// says something else wakes it, but a timer that came due meanwhile (the executor was busy) was
// taken for the tick it had been armed for: a run though the loop had said nothing was due.
#[test]
fn a_timer_armed_before_a_turn_said_otherwise_makes_no_run() {
    let (pump, next, runs) = scripted_pump(ffi_pump::Next::Tick);
    // One thread for the driver and the test: while the test holds it, the driver sleeps on.
    let executor = async_executor::LocalExecutor::new();
    let _driver = executor.spawn(pump.run());
    let waiting = pump.clone();
    let _pending = executor.spawn(async move { waiting.wait_until(|| false).timeout(HOUR).await });
    futures_lite::future::block_on(executor.run(async {
        let ticking = runs.clone();
        eventually("ticks", || ticking.load(Ordering::SeqCst) >= 3).await;
        for says in [
            ffi_pump::Next::Idle,
            ffi_pump::Next::At(Instant::now() + HOUR),
        ] {
            *next.lock().unwrap() = says;
            pump.turn().await.expect("a turn");
            let after = runs.load(Ordering::SeqCst);
            // The executor stalls past the tick the driver's timer was armed for.
            thread::sleep(Duration::from_millis(30));
            Timer::after(Duration::from_millis(100)).await;
            let extra = runs.load(Ordering::SeqCst) - after;
            assert_eq!(extra, 0, "runs after the loop said {says:?}");
            *next.lock().unwrap() = ffi_pump::Next::Tick;
            pump.turn().await.expect("a turn");
            let ticking = runs.clone();
            let resumed = runs.load(Ordering::SeqCst);
            eventually("ticks again", || {
                ticking.load(Ordering::SeqCst) >= resumed + 3
            })
            .await;
        }
        pump.close();
    }));
}

/// Found by a randomized stress probe: a pump turned by the readiness of a descriptor its
/// `run_once` owns was closed, and `closed()` returned (dropping `run_once`, the descriptor with
/// it), while the driver was still between the readiness run and its next step (here: waking a
/// wait whose waker is slow). The driver then found the descriptor gone and failed the pump
/// with `Error::Trigger`, which replaced `Closed` as the answer of every later wait.
#[cfg(unix)]
#[test]
fn a_pump_closed_stays_closed_when_its_descriptor_goes_with_the_loop() {
    use std::future::Future;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::sync::atomic::AtomicU64;
    use std::task::{Context, Wake, Waker};

    /// A waker whose first wake takes a while (a busy executor, a preempted thread); says when
    /// that wake returned.
    struct SlowWaker(AtomicBool, AtomicBool);
    impl Wake for SlowWaker {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            if self.0.swap(false, Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(300));
                self.1.store(true, Ordering::SeqCst);
            }
        }
    }

    let (library_side, signal) = UnixStream::pair().expect("socket pair");
    library_side.set_nonblocking(true).expect("nonblocking");
    let runs = Arc::new(AtomicU64::new(0));
    let counter = runs.clone();
    let mut library = Some(library_side);
    let pump = Pump::builder()
        .interval(HOUR)
        .run_on_readable(library.as_ref().expect("made"))
        .build(move || {
            // The library owns its descriptor, as a binding's run_once does, and drains it.
            let mut buf = [0; 64];
            while let Some(Ok(1..)) = library.as_mut().map(|fd| fd.read(&mut buf)) {}
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("valid settings");
    pump.spawn_on(ffi_pump::Backend::Thread)
        .expect("thread backend");
    // A wait the readiness run completes; the driver wakes it, slowly, right after that run.
    let seen = runs.clone();
    let mut wait = Box::pin(pump.wait_until(move || seen.load(Ordering::SeqCst) > 0));
    let slow = Arc::new(SlowWaker(AtomicBool::new(true), AtomicBool::new(false)));
    let waker = Waker::from(slow.clone());
    assert!(wait
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    (&signal).write_all(&[1]).expect("signal");
    let started = Instant::now();
    while runs.load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the readiness run"
        );
        thread::sleep(Duration::from_micros(100));
    }
    assert!(pump.close());
    async_io::block_on(pump.closed()).expect("closed by close()");
    let answer = || async_io::block_on(pump.wait_until(|| true));
    assert_eq!(answer(), Err(Error::Closed), "right after closed()");
    // The driver takes its next step once the slow wake returns: watched for 300 ms after.
    let started = Instant::now();
    while !slow.1.load(Ordering::SeqCst) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the slow wake returns"
        );
        thread::sleep(Duration::from_millis(1));
    }
    let returned = Instant::now();
    while returned.elapsed() < Duration::from_millis(300) {
        assert_eq!(answer(), Err(Error::Closed), "once the driver looked again");
        thread::sleep(Duration::from_millis(1));
    }
    drop(wait);
}
