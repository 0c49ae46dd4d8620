//! Closing, dropping, panics, idling, and pumps nobody drives.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_io::Timer;
use common::{assert_clean, fixture_spread, STRATEGIES};
use fake_loop::FakeLoop;
use ffi_pump::{Error, Pump};
use futures_lite::FutureExt;

/// Spawns `n` waits that never succeed (on a never-armed fixture id), returning their tasks once
/// the pump counts all of them as pending.
async fn pending_waits(
    rt: common::Rt,
    pump: &Pump,
    fx: &Arc<FakeLoop>,
    n: usize,
) -> Vec<common::Task<Result<(), Error>>> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (pump, fx) = (pump.clone(), fx.clone());
            rt.spawn(async move { pump.wait_until(move || fx.check(0)).await })
        })
        .collect();
    common::pending(pump, n).await;
    tasks
}

on_every_backend! {
    fn close_returns_at_once_while_a_check_waits_for_the_closing_thread(rt: Rt) {
        // Regression: `close` emptied the registry under the lock a pass over the checks holds,
        // so it waited for the checks under way — for ever if one of them waited for the
        // closing thread (an application that closes the pump while holding a lock its checks
        // take). The crate docs say `close` never waits.
        let fx = Arc::new(FakeLoop::new(1));
        rt.block_on(async {
            let pump = rt.pump(Pump::builder(), &fx);
            let (entered, in_check) = async_channel::bounded::<()>(1);
            let (release, released) = std::sync::mpsc::channel::<()>();
            let mut first = true;
            let check_fx = fx.clone();
            let waiting = rt.spawn(pump.wait_until(move || {
                // The first check runs in the waiting task: only the pump's wait for the closer.
                if !std::mem::take(&mut first) {
                    let _ = entered.try_send(());
                    // Bounded, so the test fails instead of hanging on a `close` that waits.
                    let _ = released.recv_timeout(common::HANG);
                }
                check_fx.check(0)
            }));
            common::within("the pump's check", in_check.recv()).await.expect("the check ran");
            let closing = Instant::now();
            assert!(pump.close());
            let took = closing.elapsed();
            let _ = release.send(());
            assert!(took < Duration::from_secs(2), "close waited {took:?} for a check");
            assert_eq!(common::within("the wait", waiting).await, Err(Error::Closed));
        });
    }

    fn a_broadcast_wait_queued_behind_a_run_ends_at_the_close(rt: Rt) {
        // Regression: a broadcast wait whose look found the loop running queues for the loop
        // lock, and only the lock woke it: a close during a long run ended it only once the run
        // returned, while `close` promises that pending waits end at once.
        let fx = Arc::new(FakeLoop::new(1));
        let block_next = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (entered, in_run) = async_channel::bounded::<()>(1);
        let (release, released) = std::sync::mpsc::channel::<()>();
        rt.block_on(async {
            let (run_fx, block) = (fx.clone(), block_next.clone());
            let builder = Pump::builder().strategy(ffi_pump::Strategy::Broadcast);
            let pump = rt.pump_with(builder, move || {
                run_fx.run_once().expect("not re-entered");
                if block.swap(false, Ordering::SeqCst) {
                    let _ = entered.try_send(());
                    // Bounded, so the test fails instead of hanging if the wait never ends.
                    let _ = released.recv_timeout(common::HANG);
                }
            });
            block_next.store(true, Ordering::SeqCst);
            pump.kick();
            common::within("the long run", in_run.recv()).await.expect("the run started");
            // On a thread of its own: the run may block the executor's only thread (smol's).
            let (outcome, waiting) = async_channel::bounded(1);
            let wait = pump.wait_until({
                let fx = fx.clone();
                move || fx.check(0)
            });
            std::thread::spawn(move || outcome.send_blocking(async_io::block_on(wait)));
            common::pending(&pump, 1).await;
            assert!(pump.close());
            let ended = async { waiting.recv().await.ok() }
                .or(async {
                    Timer::after(Duration::from_secs(2)).await;
                    None
                })
                .await;
            let _ = release.send(());
            assert_eq!(ended, Some(Err(Error::Closed)), "the wait did not end while the run went on");
        });
    }

    fn close_ends_pending_and_later_waits_with_closed(rt: Rt) {
        for strategy in STRATEGIES {
            let fx = Arc::new(FakeLoop::new(1));
            rt.block_on(async {
                let pump = rt.pump(Pump::builder().strategy(strategy), &fx);
                let tasks = pending_waits(rt, &pump, &fx, 1_000).await;
                let closed_at = Instant::now();
                assert!(pump.close(), "the first close closes");
                assert!(!pump.close(), "a second close reports it was closed already");
                for task in tasks {
                    assert_eq!(task.await, Err(Error::Closed));
                }
                let elapsed = closed_at.elapsed();
                assert!(elapsed < Duration::from_secs(2), "waits took {elapsed:?} to see the close");
                assert_eq!(pump.wait_until(|| true).await, Err(Error::Closed));
                assert_eq!(pump.turn().await, Err(Error::Closed));
                assert_eq!(pump.stats().pending_waits, 0);
                assert!(pump.is_closed());
            });
        }
    }

    fn close_racing_busy_waits_never_hangs(rt: Rt) {
        // Regression: a broadcast wait that looked at the status before listening again missed
        // a close in between and slept forever. Many waits re-checking every 100 µs, closed at a
        // random moment, make that window likely.
        for strategy in STRATEGIES {
            rt.block_on(async {
                for round in 0..20 {
                    let fx = Arc::new(FakeLoop::new(1));
                    fx.set_cost(Duration::ZERO);
                    let builder = Pump::builder().strategy(strategy).interval(Duration::from_micros(100));
                    let pump = rt.pump(builder, &fx);
                    let tasks: Vec<_> = (0..500)
                        .map(|_| {
                            let (pump, fx) = (pump.clone(), fx.clone());
                            rt.spawn(async move { pump.wait_until(move || fx.check(0)).await })
                        })
                        .collect();
                    Timer::after(Duration::from_micros(fastrand::u64(0..20_000))).await;
                    pump.close();
                    for task in tasks {
                        let outcome = futures_lite::FutureExt::or(async { Some(task.await) }, async {
                            Timer::after(Duration::from_secs(5)).await;
                            None
                        })
                        .await;
                        assert_eq!(outcome, Some(Err(Error::Closed)), "{strategy:?}, round {round}");
                    }
                }
            });
        }
    }

    fn dropping_every_handle_stops_the_pump(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        let (alive, gone) = async_channel::bounded::<()>(1);
        rt.block_on(async {
            let run_fx = fx.clone();
            // Keep ticking with no waits, so only the handles keep the pump going.
            let pump = rt.pump_with(Pump::builder().idle_stop(false), move || {
                let _alive = &alive;
                run_fx.run_once().expect("not re-entered");
            });
            let (probe, rounds) = (pump.clone(), 3);
            pump.wait_until(move || probe.stats().rounds >= rounds)
                .timeout(Duration::from_secs(10))
                .await
                .expect("the pump ticks");
            drop(pump);
            // The loop closure (and the channel sender in it) is dropped once the pump stops.
            let stopped = gone
                .recv()
                .or(async {
                    Timer::after(Duration::from_secs(10)).await;
                    Ok(())
                })
                .await;
            assert!(stopped.is_err(), "the pump still holds its loop 10 s after the last handle");
            let calls = fx.stats().calls;
            Timer::after(Duration::from_millis(20)).await;
            assert_eq!(fx.stats().calls, calls, "the loop ran after the pump stopped");
        });
    }

    fn panic_in_run_once_fails_every_wait_with_panicked(rt: Rt) {
        for strategy in STRATEGIES {
            let fx = Arc::new(FakeLoop::new(1));
            rt.block_on(async {
                let calls = AtomicU64::new(0);
                let run_fx = fx.clone();
                let pump = rt.pump_with(Pump::builder().strategy(strategy), move || {
                    if calls.fetch_add(1, Ordering::SeqCst) == 2 {
                        panic!("run_once panics on its 3rd call (expected by this test)");
                    }
                    run_fx.run_once().expect("not re-entered");
                });
                let tasks: Vec<_> = (0..100)
                    .map(|_| {
                        let (pump, fx) = (pump.clone(), fx.clone());
                        rt.spawn(async move {
                            pump.wait_until(move || fx.check(0)).timeout(Duration::from_secs(10)).await
                        })
                    })
                    .collect();
                for task in tasks {
                    assert_eq!(task.await, Err(Error::Panicked));
                }
                assert_eq!(pump.wait_until(|| true).await, Err(Error::Panicked));
                assert_eq!(pump.turn().await, Err(Error::Panicked));
                let stats = pump.stats();
                assert!(stats.panicked && stats.closed, "{stats:?}");
                assert_eq!(stats.rounds, 3);
                assert_eq!(fx.stats().calls, 2, "the loop ran after the panic");
            });
        }
    }

    fn idle_pump_does_not_call_the_loop_and_wakes_for_a_new_wait(rt: Rt) {
        for strategy in STRATEGIES {
            let fx = fixture_spread(10, Duration::from_millis(20));
            rt.block_on(async {
                let pump = rt.pump(Pump::builder().strategy(strategy), &fx);
                for id in 0..10 {
                    let fx = fx.clone();
                    pump.wait_until(move || fx.check(id))
                        .timeout(Duration::from_secs(10))
                        .await
                        .expect("wait completes");
                }
                assert_eq!(pump.stats().pending_waits, 0);
                let idle_from = fx.stats().calls;
                Timer::after(Duration::from_millis(300)).await;
                let idle_calls = fx.stats().calls - idle_from;
                // A tick that had begun before the last wait finished may still land: at most one.
                assert!(idle_calls <= 1, "{idle_calls} loop calls in 300 ms with no wait pending");

                // A wait on something only a new run can make true: the loop's next call.
                let late = fx.clone();
                let target = fx.stats().calls + 1;
                pump.wait_until(move || late.stats().calls >= target)
                    .timeout(Duration::from_secs(10))
                    .await
                    .expect("a new wait restarts the idle pump");
                assert_clean(&fx);
            });
        }
    }
}

#[test]
fn zero_interval_is_rejected() {
    let err = Pump::builder()
        .interval(Duration::ZERO)
        .build(|| {})
        .expect_err("a zero interval is refused");
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(err.to_string().contains("interval"), "{err}");
}

#[test]
fn wait_on_a_pump_nobody_drives_fails_fast() {
    let fx = Arc::new(FakeLoop::new(1));
    let run_fx = fx.clone();
    let pump = Pump::new(move || run_fx.run_once().expect("not re-entered"));
    let outcome =
        futures_lite::future::block_on(pump.wait_until(|| false).timeout(Duration::from_secs(5)));
    assert_eq!(outcome, Err(Error::NotRunning));
    assert_eq!(pump.stats().pending_waits, 0);
    // A turn needs no driver: the caller runs the loop itself.
    futures_lite::future::block_on(common::within("a turn", pump.turn()))
        .expect("turn runs the loop");
    assert_eq!(fx.stats().calls, 1);
}

/// The threads the crate starts say what they are, as the docs name them: the driver thread of
/// `Backend::Thread` ("ffi-pump-driver") and a loop's own thread ("ffi-pump-loop").
/// What `what` returns on each thread the crate starts: in `run_once` on `Backend::Thread`'s
/// thread (its first run), and in a call on a loop's own thread.
fn on_the_crates_threads<T: Send + 'static>(what: fn() -> T) -> (T, T) {
    let first = Arc::new(std::sync::Mutex::new(None));
    let record = first.clone();
    let driven = Pump::builder()
        .build(move || {
            let mut first = record.lock().unwrap();
            if first.is_none() {
                *first = Some(what());
            }
        })
        .expect("valid settings");
    driven
        .spawn_on(ffi_pump::Backend::Thread)
        .expect("a thread");
    driven.kick();
    futures_lite::future::block_on(common::eventually("a run", || {
        first.lock().unwrap().is_some()
    }));
    let on_the_driver = first.lock().unwrap().take().expect("recorded");
    let (_owner, handle) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("the loop's thread starts");
    let on_the_loop = futures_lite::future::block_on(handle.call(move |_| what()));
    (on_the_driver, on_the_loop.expect("a call"))
}

#[test]
fn the_crates_threads_are_named_as_documented() {
    let name = || std::thread::current().name().map(str::to_owned);
    let (driver, loop_thread) = on_the_crates_threads(name);
    assert_eq!(driver.as_deref(), Some("ffi-pump-driver"));
    assert_eq!(loop_thread.as_deref(), Some("ffi-pump-loop"));
}

/// Recurses until about `bytes` of the stack below `top` are in use, as a C library's recursion
/// may (Tcl's parser); returns how deep it went, in bytes.
#[inline(never)]
fn deep(top: usize, bytes: usize) -> usize {
    let frame = std::hint::black_box([0_u8; 16 << 10]);
    let here = frame.as_ptr() as usize;
    match top.saturating_sub(here) {
        used if used >= bytes => used,
        _ => std::hint::black_box(deep(top, bytes)),
    }
}

/// How deep `deep` goes from this thread's current frame.
fn use_stack(bytes: usize) -> usize {
    let top = 0_u8;
    deep(std::ptr::addr_of!(top) as usize, bytes)
}

/// Found by a hostile probe of the Tcl binding: a deeply nested script overflowed the loop's
/// thread's stack (std's 2 MiB) and aborted the process, where tclsh, on a main thread's 8 MiB,
/// answers with an error. Both threads the crate starts run C code with 8 MiB; 6 MiB of it used
/// here (this test aborted the whole binary before).
#[test]
fn the_crates_threads_have_a_c_programs_stack() {
    let (driver, loop_thread) = on_the_crates_threads(|| use_stack(6 << 20));
    assert!(driver >= 6 << 20);
    assert!(loop_thread >= 6 << 20);
}

/// Found by a hostile probe: a broadcast wait (and `wait_until_local`, which always is one)
/// first polled while a run held the loop lock queued for it; the pump closed meanwhile; the
/// wait, polled once the lock was let go, took it and ran its check — on a library that
/// `closed()` frees under that lock — and, its check true, ended `Ok` after the close.
#[test]
fn a_wait_queued_for_the_loop_lock_never_checks_after_the_close() {
    use ffi_pump::Strategy;
    use std::future::Future;
    use std::sync::atomic::AtomicBool;
    use std::task::{Context, Poll, Wake, Waker};
    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    for local in [false, true] {
        let (in_run, release) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (running, released) = (in_run.clone(), release.clone());
        let pump = Pump::builder()
            .strategy(Strategy::Broadcast)
            .build(move || {
                running.store(true, Ordering::SeqCst);
                while !released.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
            .expect("valid settings");
        pump.spawn_on(ffi_pump::Backend::Thread).expect("a thread");
        let noop = Waker::noop();
        let mut starter = Box::pin(pump.wait_until(|| false));
        let _ = starter.as_mut().poll(&mut Context::from_waker(noop));
        while !in_run.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_micros(200));
        }
        let checked = Arc::new(AtomicBool::new(false));
        let seen = checked.clone();
        let check = move || {
            seen.store(true, Ordering::SeqCst);
            true
        };
        let mut wait: std::pin::Pin<Box<dyn Future<Output = Result<(), Error>>>> = match local {
            false => Box::pin(pump.wait_until(check)),
            true => Box::pin(pump.wait_until_local(check)),
        };
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(
            wait.as_mut().poll(&mut cx).is_pending(),
            "queued for the lock"
        );
        pump.close();
        release.store(true, Ordering::SeqCst); // the run ends, and lets the lock go
        let started = Instant::now();
        while !flag.0.load(Ordering::SeqCst) {
            assert!(
                started.elapsed() < common::HANG,
                "the lock's release woke the wait"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            wait.as_mut().poll(&mut cx),
            Poll::Ready(Err(Error::Closed)),
            "local: {local}"
        );
        assert!(
            !checked.load(Ordering::SeqCst),
            "checked after the close (local: {local})"
        );
        futures_lite::future::block_on(pump.closed()).expect("closed by close()");
    }
}

/// Found by a randomized stress probe: a driver woken by a kick, or a turn, that queued for the
/// loop lock while a check held it got the lock after `close()` had returned, and ran the loop
/// ("the loop is not called again"). On every backend that drives a loop in the pump.
#[test]
fn a_run_queued_for_the_loop_lock_never_starts_after_close_returned() {
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;

    // How the run queues: the driver for a kick, or a turn of another thread.
    let kick = |pump: &Pump| pump.kick();
    let turn = |pump: &Pump| {
        let turner = pump.clone();
        std::thread::spawn(move || drop(async_io::block_on(turner.turn())));
    };
    type Queue<'a> = (&'a str, &'a dyn Fn(&Pump));
    let queues: [Queue<'_>; 2] = [("kick", &kick), ("turn", &turn)];
    for strategy in STRATEGIES {
        for (how, queue) in queues {
            let closed = Arc::new(AtomicBool::new(false));
            let after = Arc::new(AtomicU64::new(0));
            let (flag, count) = (closed.clone(), after.clone());
            let pump = Pump::builder()
                .interval(Duration::from_secs(3600))
                .strategy(strategy)
                .build(move || {
                    if flag.load(Ordering::SeqCst) {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                })
                .expect("valid settings");
            pump.spawn_on(ffi_pump::Backend::Thread)
                .expect("thread backend");
            // A check that holds the loop lock until released (a slow status call into C).
            let (entered_tx, entered) = mpsc::channel();
            let (release, released) = mpsc::channel::<()>();
            let waiter = pump.clone();
            let checking = std::thread::spawn(move || {
                let mut first = true;
                let check = move || {
                    if std::mem::take(&mut first) {
                        entered_tx.send(()).expect("the test waits");
                        released.recv().expect("the test releases");
                    }
                    true
                };
                async_io::block_on(waiter.wait_until(check).timeout(Duration::from_secs(10)))
            });
            entered.recv().expect("the check runs");
            queue(&pump);
            // Time for the run to queue for the lock; a shorter one only weakens the test.
            std::thread::sleep(Duration::from_millis(50));
            assert!(pump.close());
            closed.store(true, Ordering::SeqCst);
            release.send(()).expect("the check waits");
            let _ = checking.join();
            async_io::block_on(pump.closed()).expect("closed");
            let after = after.load(Ordering::SeqCst);
            assert_eq!(
                after, 0,
                "runs after close() returned ({strategy:?}, {how})"
            );
        }
    }
}

/// Drops slowly, then says so.
struct SlowDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for SlowDrop {
    fn drop(&mut self) {
        std::thread::sleep(Duration::from_millis(200));
        self.0.store(true, Ordering::SeqCst);
    }
}

// Found by review: a close from outside during a pass leaves the registry to the pass's
// holder, which empties it as it lets go of the loop lock; `closed()`, which took that lock,
// returned while the holder still dropped what the checks captured (handles into the library,
// which a program frees after `closed()`).
#[test]
fn what_the_checks_captured_is_dropped_once_closed_returns() {
    use std::sync::atomic::AtomicBool;
    async_io::block_on(async {
        let pump = Pump::builder().build(|| {}).expect("valid settings");
        pump.spawn_on(ffi_pump::Backend::Thread)
            .expect("thread backend");
        let in_pass = Arc::new(AtomicBool::new(false));
        let entered = in_pass.clone();
        let mut first = true;
        // Holds the pass for 300 ms at its second check.
        let slow = pump.wait_until(move || {
            if !std::mem::take(&mut first) {
                entered.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(300));
            }
            false
        });
        let dropped = Arc::new(AtomicBool::new(false));
        let captured = SlowDrop(dropped.clone());
        let other = pump.wait_until(move || {
            let _ = &captured;
            false
        });
        let slow = std::thread::spawn(move || async_io::block_on(slow));
        let other = std::thread::spawn(move || async_io::block_on(other));
        common::pending(&pump, 2).await;
        common::eventually("a pass in the slow check", || {
            in_pass.load(Ordering::SeqCst)
        })
        .await;
        pump.close();
        pump.closed().await.expect("closed");
        assert!(
            dropped.load(Ordering::SeqCst),
            "closed() returned while a check's captures were alive"
        );
        assert_eq!(slow.join().unwrap(), Err(Error::Closed));
        assert_eq!(other.join().unwrap(), Err(Error::Closed));
    });
}

// Found sound by review: a close racing passes over slow checks, sweeps, timeouts and passes
// cut by their budget ends every wait, returns at once, and no check runs after its wait ended.
mod close_races {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

    on_every_backend! {
        fn close_racing_passes_ends_every_wait_and_runs_no_check_after_its_wait(rt: Rt) {
            let violations = Arc::new(AtomicUsize::new(0));
            let busy_closes = Arc::new(AtomicUsize::new(0));
            let depth = Arc::new(AtomicUsize::new(0));
            let mut rng = fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15);
            let mut rand = move |n: u64| rng.u64(..n);
            for round in 0..40 {
                let violations = violations.clone();
                let (busy_closes, depth) = (busy_closes.clone(), depth.clone());
                let delay = rand(6);
                let budgets = [Duration::from_micros(100), Duration::from_millis(5)];
                let budget = budgets[(round % 2) as usize];
                let timeouts: Vec<u64> = (0..120).map(|_| rand(8)).collect();
                let succeed_at: Vec<u64> = (0..120).map(|_| rand(40)).collect();
                rt.block_on(async move {
                    let strategy = common::STRATEGIES[(round / 2 % 2) as usize];
                    let builder = Pump::builder()
                        .strategy(strategy)
                        .interval(Duration::from_millis(1));
                    // A broadcast pump evaluates no checks, and refuses a budget.
                    let builder = match strategy {
                        ffi_pump::Strategy::PumpEvaluated => builder.check_budget(budget),
                        _ => builder,
                    };
                    let pump = rt.pump_with(builder, || {});
                    let tasks: Vec<_> = (0..120)
                        .map(|i| {
                            let gone = Arc::new(AtomicBool::new(false));
                            let (in_check, violations) = (gone.clone(), violations.clone());
                            let depth = depth.clone();
                            let mut calls = 0u64;
                            let target = succeed_at[i];
                            let wait = pump.wait_until(move || {
                                if in_check.load(SeqCst) {
                                    violations.fetch_add(1, SeqCst);
                                }
                                depth.fetch_add(1, SeqCst);
                                std::thread::sleep(Duration::from_micros(30));
                                depth.fetch_sub(1, SeqCst);
                                calls += 1;
                                calls > target
                            });
                            let timeout = timeouts[i];
                            rt.spawn(async move {
                                let outcome = match timeout {
                                    0..=3 => wait.timeout(Duration::from_millis(timeout)).await,
                                    _ => wait.await,
                                };
                                gone.store(true, SeqCst);
                                outcome
                            })
                        })
                        .collect();
                    async_io::Timer::after(Duration::from_millis(delay)).await;
                    if depth.load(SeqCst) > 0 {
                        busy_closes.fetch_add(1, SeqCst);
                    }
                    let closing = Instant::now();
                    pump.close();
                    let took = closing.elapsed();
                    assert!(took < Duration::from_millis(200), "close took {took:?}");
                    for task in tasks {
                        let outcome = common::within("a wait after the close", task).await;
                        assert!(
                            matches!(outcome, Ok(()) | Err(Error::Closed) | Err(Error::TimedOut)),
                            "{outcome:?}"
                        );
                    }
                    drop(pump);
                });
            }
            eprintln!("closes during a check: {} of 40", busy_closes.load(SeqCst));
            assert_eq!(violations.load(SeqCst), 0, "checks ran after their wait ended");
        }
    }
}

/// A broadcast wait polled once while a run holds the loop lock, then kept but never polled
/// again (it lost a `select!`, its executor is no longer driven), does not take the lock's
/// releases with it: a close during that run completes. Found by a shutdown probe: the lock
/// handed the release to one waiter, this one, and `closed()` (and the driver) queued behind it
/// waited for ever (7 of 7 runs).
#[test]
fn a_wait_kept_unpolled_while_it_queued_for_the_loop_lock_holds_nothing_up() {
    use std::sync::atomic::AtomicBool;
    let running = Arc::new(AtomicBool::new(false));
    let in_run = running.clone();
    let pump = Pump::builder()
        .strategy(ffi_pump::Strategy::Broadcast)
        .interval(Duration::from_millis(1))
        .build(move || {
            in_run.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(40));
            in_run.store(false, Ordering::SeqCst);
        })
        .expect("valid settings");
    pump.spawn_on(ffi_pump::Backend::Thread).expect("a thread");
    futures_lite::future::block_on(async {
        // A wait that keeps the pump running, polled elsewhere.
        let waiting = pump.clone();
        let _kept = std::thread::spawn(move || {
            async_io::block_on(
                waiting
                    .wait_until(|| false)
                    .timeout(Duration::from_secs(30)),
            )
        });
        common::eventually("a run in progress", || running.load(Ordering::SeqCst)).await;
        // Queued for the lock behind that run, then never polled again.
        let mut parked = Box::pin(pump.wait_until(|| false));
        assert!(futures_lite::future::poll_once(parked.as_mut())
            .await
            .is_none());
        pump.close();
        common::within("closed", pump.closed())
            .await
            .expect("closed");
        drop(parked);
    });
}

/// A standby driver polled once, then kept but never polled again (a `run()` that lost a
/// `select!`, a task on a runtime nobody drives any more), does not take the active driver's
/// release with it: a standby that is driven takes over, and a wait pending before the active
/// one went gets its runs. Found by a hostile probe of the drivers (10 of 10): the right to be
/// active was an async mutex, which handed the release to the first standby queued, this one.
#[test]
fn a_driven_standby_takes_over_though_one_queued_before_it_is_never_polled_again() {
    let runs = Arc::new(AtomicU64::new(0));
    let counted = runs.clone();
    let pump = Pump::builder()
        .interval(Duration::from_millis(1))
        .build(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .expect("valid settings");
    let active = smol::spawn(pump.run());
    // A wait pending throughout: it needs runs from whoever drives the pump.
    let target = Arc::new(AtomicU64::new(u64::MAX));
    let waiter = std::thread::spawn({
        let (pump, runs, target) = (pump.clone(), runs.clone(), target.clone());
        move || {
            let enough = move || runs.load(Ordering::SeqCst) >= target.load(Ordering::SeqCst);
            futures_lite::future::block_on(pump.wait_until(enough).timeout(common::HANG))
        }
    });
    futures_lite::future::block_on(async {
        common::pending(&pump, 1).await;
        // Ticks: the only driver is active.
        common::eventually("ticks", || runs.load(Ordering::SeqCst) >= 3).await;
    });
    // Two standbys queue behind it: the first is never polled again.
    let (mut unpolled, mut driven) = (Box::pin(pump.run()), Box::pin(pump.run()));
    for standby in [&mut unpolled, &mut driven] {
        let polled = futures_lite::future::poll_once(standby.as_mut());
        assert!(
            futures_lite::future::block_on(polled).is_none(),
            "stands by"
        );
    }
    let _driving = std::thread::spawn(move || futures_lite::future::block_on(driven));
    futures_lite::future::block_on(active.cancel());
    target.store(runs.load(Ordering::SeqCst) + 5, Ordering::SeqCst);
    assert_eq!(waiter.join().expect("the waiter"), Ok(()));
    drop(unpolled);
    pump.close();
}

/// A tokio runtime shut down whose handle is still entered takes no task: spawning there is
/// refused, and `detect` looks elsewhere. Found by a hostile probe of the backends (10 of 10):
/// `spawn_on(Backend::Tokio)` said `Ok`, the runtime dropped the driver as it was spawned, and
/// that closed the pump.
#[cfg(feature = "tokio")]
#[test]
fn spawning_on_a_shut_down_tokio_runtime_is_refused_and_leaves_the_pump_open() {
    use ffi_pump::Backend;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("a runtime");
    let handle = runtime.handle().clone();
    drop(runtime);
    let pump = Pump::new(|| {});
    {
        let _entered = handle.enter();
        assert!(!Backend::Tokio.is_available());
        assert_eq!(
            pump.spawn_on(Backend::Tokio),
            Err(Error::BackendUnavailable(Backend::Tokio))
        );
        assert_ne!(Backend::detect(), Backend::Tokio);
    }
    assert!(!pump.is_closed());
    pump.spawn_on(Backend::Thread).expect("a thread");
    futures_lite::future::block_on(common::within("a turn", pump.turn())).expect("turned");
}
