//! Completion-driven waits: `run_once` reports finished keys into a `Completions` table.

mod common;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::{assert_clean, fixture_spread, pending};
use fake_loop::FakeLoop;
use ffi_pump::{Completions, Error, Pump};

/// A pump whose `run_once` runs the fixture and completes every id it made ready with the
/// moment C marked it ready.
fn reporting_pump(rt: common::Rt, fx: &Arc<FakeLoop>, table: &Completions<u32, u64>) -> Pump {
    let (fx, table) = (fx.clone(), table.clone());
    let mut finished = Vec::new();
    rt.pump_with(Pump::builder(), move || {
        fx.run_once().expect("not re-entered");
        fx.take_ready(&mut finished);
        for id in finished.drain(..) {
            table.complete(id, fx.ready_at_ns(id).expect("reported ids are ready"));
        }
    })
}

/// A pump whose loop, on its own thread, has no state and nothing to run: its close runs the
/// cancel hooks it holds.
fn loop_pump() -> (Pump, ffi_pump::LoopHandle<()>) {
    Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts")
}

on_every_backend! {
    fn keyed_waits_get_their_own_values(rt: Rt) {
        const WAITERS: u32 = 5_000;
        let fx = fixture_spread(WAITERS, Duration::from_millis(200));
        let table = Completions::new();
        rt.block_on(async {
            let pump = reporting_pump(rt, &fx, &table);
            let tasks: Vec<_> = (0..WAITERS)
                .map(|id| {
                    let (pump, table) = (pump.clone(), table.clone());
                    rt.spawn(async move {
                        pump.wait_key(&table, id).timeout(Duration::from_secs(60)).await
                    })
                })
                .collect();
            for (id, task) in (0..WAITERS).zip(tasks) {
                let ready_at = task.await.expect("keyed wait completes");
                assert_eq!(Some(ready_at), fx.ready_at_ns(id), "id {id} got another id's value");
            }
            assert_eq!(table.unclaimed(), 0);
            assert_eq!(pump.stats().pending_waits, 0);
            assert_clean(&fx);
        });
    }

    fn a_value_completed_before_the_wait_is_kept_for_it(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        let table = Completions::new();
        rt.block_on(async {
            let pump = reporting_pump(rt, &fx, &table);
            fx.arm_in(0, Duration::ZERO);
            pump.turn().await.expect("turn");
            assert_eq!(table.unclaimed(), 1, "the run completed id 0");
            let value = pump.wait_key(&table, 0).timeout(Duration::ZERO).await;
            assert_eq!(value.ok(), fx.ready_at_ns(0));
        });
    }

    fn a_second_wait_on_a_key_is_refused(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        let table = Completions::new();
        rt.block_on(async {
            let pump = reporting_pump(rt, &fx, &table);
            let first = rt.spawn({
                let (pump, table) = (pump.clone(), table.clone());
                async move { pump.wait_key(&table, 0).timeout(Duration::from_secs(10)).await }
            });
            pending(&pump, 1).await;
            assert_eq!(pump.wait_key(&table, 0).await, Err(Error::KeyInUse));
            fx.arm_in(0, Duration::ZERO);
            assert_eq!(first.await.ok(), fx.ready_at_ns(0), "the first wait keeps its key");
        });
    }

    fn a_timed_out_key_wait_leaves_the_late_value_in_the_table(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1));
        let table = Completions::new();
        rt.block_on(async {
            let pump = reporting_pump(rt, &fx, &table);
            let outcome = pump.wait_key(&table, 0).timeout(Duration::from_millis(30)).await;
            assert_eq!(outcome, Err(Error::TimedOut));
            assert_eq!(pump.stats().pending_waits, 0);
            fx.arm_in(0, Duration::ZERO);
            pump.turn().await.expect("turn");
            assert_eq!(table.take(&0), fx.ready_at_ns(0), "the late value is kept, not lost");
        });
    }

    fn close_ends_key_waits(rt: Rt) {
        let fx = Arc::new(FakeLoop::new(1_000));
        let table = Completions::new();
        rt.block_on(async {
            let pump = reporting_pump(rt, &fx, &table);
            let tasks: Vec<_> = (0..1_000)
                .map(|id| {
                    let (pump, table) = (pump.clone(), table.clone());
                    rt.spawn(async move { pump.wait_key(&table, id).await })
                })
                .collect();
            let probe = pump.clone();
            pump.wait_until(move || probe.stats().pending_waits > 1_000)
                .timeout(Duration::from_secs(30))
                .await
                .expect("all key waits pending");
            pump.close();
            for task in tasks {
                assert_eq!(task.await, Err(Error::Closed));
            }
            assert_eq!(pump.wait_key(&table, 0).await, Err(Error::Closed));
        });
    }

    fn a_panic_in_run_once_ends_key_waits_with_panicked(rt: Rt) {
        let table = Completions::<u32, ()>::new();
        rt.block_on(async {
            let mut calls = 0;
            let pump = rt.pump_with(Pump::builder(), move || {
                calls += 1;
                assert!(calls < 3, "run_once panics on its 3rd call (expected by this test)");
            });
            let outcome = pump.wait_key(&table, 9).timeout(Duration::from_secs(10)).await;
            assert_eq!(outcome, Err(Error::Panicked));
        });
    }
}

/// Regression (#15, defect 2): a table remembered the pumps whose close it would hear by their
/// address. A pump freed and a new one allocated at the same address was never hooked, so its
/// close did not wake the table's waits on it (and the list grew by one per pump ever used).
#[test]
fn issue_15_a_table_hears_the_close_of_every_pump_it_serves() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    #[derive(Default)]
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    let table = Completions::<u32, ()>::new();
    for key in 0..100 {
        // One pump at a time, freed on this thread before the next is made: the allocator
        // likely hands the next one the same address.
        let pump = Pump::builder()
            .interval(Duration::from_secs(3600))
            .build(|| {})
            .expect("valid settings");
        let driver = pump.run(); // counts as a driver, never polled: nothing runs
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let mut wait = Box::pin(pump.wait_key(&table, key));
        let mut cx = Context::from_waker(&waker);
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        pump.close();
        assert!(
            count.0.load(Ordering::SeqCst) > 0,
            "pump {key}: the close did not wake the wait on its key"
        );
        assert!(matches!(
            wait.as_mut().poll(&mut cx),
            Poll::Ready(Err(Error::Closed))
        ));
        drop((wait, driver, pump));
    }
}

/// Found by a hostile probe: a value completed for a key whose wait had given up with a cancel
/// hook not yet run was dropped, as documented, but took the key's "given up" mark with it. A
/// second wait then had the key before the hook ran, and the hook, when it ran, overwrote that
/// wait's place (its value was lost, and it was never woken), or, finding the second wait's
/// value, never cancelled. The key is the first wait's until its hook ran, as the docs say (and
/// the hook, told that the work finished, cancels nothing).
#[test]
fn a_key_given_up_with_a_cancel_hook_is_nobody_elses_until_the_hook_ran() {
    use futures_lite::future::{block_on, poll_once};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::mpsc;
    let (pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    let table = Completions::<u32, u32>::new();
    // The loop's thread held in a post: the first wait's hook waits behind it.
    let (release, held) = mpsc::channel::<()>();
    let (holding, hold) = mpsc::channel();
    handle
        .post(move |_| {
            let _ = holding.send(());
            let _ = held.recv();
        })
        .expect("pump open");
    hold.recv_timeout(common::HANG).expect("the post runs");
    let cancels = Arc::new(AtomicUsize::new(0));
    let counted = cancels.clone();
    let mut first = pump.wait_key(&table, 1).on_cancel(&handle, move |_| {
        counted.fetch_add(1, SeqCst);
    });
    assert!(block_on(poll_once(&mut first)).is_none(), "pending");
    drop(first); // gives up: its hook goes to the held thread
    assert_eq!(table.complete(1, 10), None, "late: dropped");
    let second = block_on(pump.wait_key(&table, 1).timeout(common::HANG));
    assert_eq!(
        second,
        Err(Error::KeyInUse),
        "until the first wait's hook ran"
    );
    release.send(()).expect("post alive");
    block_on(handle.call(|_| ())).expect("the hook ran");
    // The library reported the work finished before the hook's turn: nothing to cancel.
    assert_eq!(cancels.load(SeqCst), 0, "no cancel of finished work");
    let mut third = pump.wait_key(&table, 1).timeout(common::HANG);
    assert!(block_on(poll_once(&mut third)).is_none(), "the key is free");
    table.complete(1, 20);
    assert_eq!(block_on(third), Ok(20));
}

/// Found in review: a cancel that panicked with a payload whose drop panics too skipped the
/// hook's end, which lets go of the key: every later wait on it got `KeyInUse`.
#[test]
fn a_cancel_hook_lets_go_of_its_key_whatever_its_cancel_panics_with() {
    use futures_lite::future::{block_on, poll_once};
    struct PanicsAsItDrops;
    impl Drop for PanicsAsItDrops {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                panic!("a payload that panics as it drops (expected by this test)");
            }
        }
    }
    let (pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    let table = Completions::<u32, u32>::new();
    let mut first = pump
        .wait_key(&table, 1)
        .on_cancel(&handle, |_| std::panic::panic_any(PanicsAsItDrops));
    assert!(block_on(poll_once(&mut first)).is_none(), "pending");
    drop(first);
    block_on(handle.call(|_| ())).expect("the hook ran");
    let second = block_on(pump.wait_key(&table, 1).timeout(Duration::from_millis(50)));
    assert_eq!(
        second,
        Err(Error::TimedOut),
        "the key is free: no `KeyInUse`"
    );
}

/// Two pumps, A (whose close runs the cancel hooks it holds, one after another) and B, wait on
/// keys of one table. Found by a hostile probe: a wait on A that the close ended let go of its
/// key before A's thread came to its hook; a wait on B took the key; the hook then marked the
/// key abandoned over B's wait, which, polled meanwhile, left its waker nowhere: it heard of
/// neither its value nor its own pump's close.
#[test]
fn a_hook_run_late_by_its_pumps_close_leaves_alone_the_key_its_wait_let_go_of() {
    use futures_lite::future::{block_on, poll_once};
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::mpsc;
    use std::task::{Context, Poll, Wake, Waker};
    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, SeqCst);
        }
    }
    let gated = |entered: mpsc::Sender<()>, gate: mpsc::Receiver<()>| {
        move |_: &mut ()| {
            let _ = entered.send(());
            let _ = gate.recv_timeout(common::HANG);
        }
    };
    for then in ["complete", "close"] {
        let table = Completions::<u32, u32>::new();
        let ((a, a_loop), (b, _b_loop)) = (loop_pump(), loop_pump());
        // A's close runs the first hook, then the second; each holds A's thread until let go.
        let ((entered, enter), (release, gate)) = (mpsc::channel(), mpsc::channel());
        let mut first = a
            .wait_key(&table, 100)
            .on_cancel(&a_loop, gated(entered, gate));
        assert!(block_on(poll_once(&mut first)).is_none(), "pending");
        let ((entered_second, enter_second), (release_second, gate_second)) =
            (mpsc::channel(), mpsc::channel());
        let cancels = Arc::new(AtomicUsize::new(0));
        let (counted, second_cancel) = (cancels.clone(), gated(entered_second, gate_second));
        let mut second = a.wait_key(&table, 1).on_cancel(&a_loop, move |state| {
            counted.fetch_add(1, SeqCst);
            second_cancel(state);
        });
        assert!(block_on(poll_once(&mut second)).is_none(), "pending");
        a.close();
        enter
            .recv_timeout(common::HANG)
            .expect("A's close runs the first hook");
        // Ended by the close, its hook taken by the close but not run yet: it lets go of key 1.
        assert_eq!(block_on(second), Err(Error::Closed));
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let mut on_b = b.wait_key(&table, 1);
        let mut poll_b = || Pin::new(&mut on_b).poll(&mut Context::from_waker(&waker));
        assert!(poll_b().is_pending(), "key 1 is free: B's wait has it");
        release.send(()).expect("the first hook waits");
        enter_second
            .recv_timeout(common::HANG)
            .expect("then the second hook runs");
        assert!(poll_b().is_pending(), "polled while the late hook cancels");
        release_second.send(()).expect("the second hook waits");
        block_on(a.closed()).expect("closed by close()");
        assert_eq!(
            cancels.load(SeqCst),
            1,
            "the second wait's cancel ran, once"
        );
        flag.0.store(false, SeqCst);
        let outcome = if then == "complete" {
            assert_eq!(table.complete(1, 11), None);
            Ok(11)
        } else {
            b.close();
            Err(Error::Closed)
        };
        assert!(flag.0.load(SeqCst), "B's wait is woken (then {then})");
        assert_eq!(poll_b(), Poll::Ready(outcome), "then {then}");
        assert_eq!(table.unclaimed(), 0);
        drop(first);
    }
}

/// A wait with a cancel hook that was never polled never had its key: when its pump's close
/// runs the hook, the cancel runs (the work the wait stood for is dropped) and the key, which
/// another pump's wait has, is left to that wait (it was marked abandoned, and a value
/// completed meanwhile dropped).
#[test]
fn the_hook_of_a_wait_never_polled_leaves_another_waits_key_alone() {
    use futures_lite::future::{block_on, poll_once};
    use std::sync::mpsc;
    let table = Completions::<u32, u32>::new();
    let ((a, a_loop), (b, _b_loop)) = (loop_pump(), loop_pump());
    let mut on_b = b.wait_key(&table, 1).timeout(Duration::from_secs(2));
    assert!(
        block_on(poll_once(&mut on_b)).is_none(),
        "B's wait has key 1"
    );
    let (entered, enter) = mpsc::channel();
    let (release, gate) = mpsc::channel::<()>();
    let never_polled = a.wait_key(&table, 1).on_cancel(&a_loop, move |_| {
        let _ = entered.send(());
        let _ = gate.recv_timeout(common::HANG);
    });
    a.close();
    enter
        .recv_timeout(common::HANG)
        .expect("A's close runs the hook: it cancels");
    assert_eq!(table.complete(1, 11), None, "while the hook runs: B's");
    release.send(()).expect("the hook waits");
    block_on(a.closed()).expect("closed by close()");
    assert_eq!(block_on(on_b), Ok(11));
    assert_eq!(block_on(never_polled), Err(Error::Closed));
    assert_eq!(table.unclaimed(), 0);
}

#[test]
#[should_panic(expected = "`on_cancel` was given the `LoopHandle` of another pump")]
fn a_cancel_hook_on_another_pumps_loop_panics() {
    let table = Completions::<u32, u32>::new();
    let (_a, a_loop) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    let (b, _b_loop) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    drop(b.wait_key(&table, 1).on_cancel(&a_loop, |_| {}));
}

/// Found in review: a wait whose cancel hook its pump's close ran (the cancel undid its work)
/// took a value completed for its key afterwards — another pump's wait's, or one nobody waited
/// for — instead of ending with the close.
#[test]
fn a_wait_whose_hook_the_close_ran_takes_no_value_after() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::task::{Context, Poll, Waker};
    fn poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
        std::pin::Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
    }
    for another_waits in [true, false] {
        let table = Completions::<u32, u32>::new();
        let ((a, a_loop), (b, _b_loop)) = (loop_pump(), loop_pump());
        let cancels = Arc::new(AtomicUsize::new(0));
        let counted = cancels.clone();
        let mut on_a = a.wait_key(&table, 1).on_cancel(&a_loop, move |_| {
            counted.fetch_add(1, SeqCst);
        });
        assert!(poll(&mut on_a).is_pending());
        a.close();
        futures_lite::future::block_on(a.closed()).expect("closed by close()");
        assert_eq!(cancels.load(SeqCst), 1, "A's close ran the hook");
        let mut on_b = b.wait_key(&table, 1);
        if another_waits {
            assert!(
                poll(&mut on_b).is_pending(),
                "key 1 is free: B's wait has it"
            );
        }
        assert_eq!(table.complete(1, 11), None);
        assert_eq!(poll(&mut on_a), Poll::Ready(Err(Error::Closed)));
        assert_eq!(
            poll(&mut on_b),
            Poll::Ready(Ok(11)),
            "B's wait, or the next"
        );
        assert_eq!(cancels.load(SeqCst), 1);
    }
}

/// Found in review: a hook given to a wait that was polled already knew nothing of its key, so
/// the close ran the cancel of a wait that then took its value.
#[test]
fn a_hook_given_after_the_first_poll_cancels_nothing_that_completed() {
    use futures_lite::future::{block_on, poll_once};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let table = Completions::<u32, u32>::new();
    let (pump, library) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    let mut wait = pump.wait_key(&table, 1);
    assert!(block_on(poll_once(&mut wait)).is_none(), "pending");
    let cancels = Arc::new(AtomicUsize::new(0));
    let counted = cancels.clone();
    let wait = wait.on_cancel(&library, move |_| {
        counted.fetch_add(1, SeqCst);
    });
    assert_eq!(table.complete(1, 5), None);
    pump.close();
    block_on(pump.closed()).expect("closed by close()");
    assert_eq!(block_on(wait), Ok(5));
    assert_eq!(
        cancels.load(SeqCst),
        0,
        "its work finished: nothing to cancel"
    );
}

/// Counts the runs of a cancel hook.
fn counted_cancel() -> (Arc<AtomicUsize>, impl FnOnce(&mut ()) + Send + 'static) {
    let cancels = Arc::new(AtomicUsize::new(0));
    let counted = cancels.clone();
    (cancels, move |_: &mut ()| {
        counted.fetch_add(1, SeqCst);
    })
}

/// Runs what the loop's thread has queued (a dropped wait's hook among it).
fn flush(handle: &ffi_pump::LoopHandle<()>) {
    futures_lite::future::block_on(handle.call(|_| ())).expect("the loop's thread");
}

/// Found by a hostile probe: a wait with a cancel hook that never had its key destroyed a value
/// completed before it — kept, by the table's promise, until a wait or `take` claims it — when
/// it ended with its pump's close (polled or dropped) or was refused at a first poll inside its
/// pump (5 of 5). Such a wait claims nothing: the value stays, and the hook does not run (the
/// work finished).
#[test]
fn a_hooked_wait_that_never_had_its_key_leaves_a_value_completed_before_it() {
    use futures_lite::future::{block_on, poll_once};
    for poll_it in [true, false] {
        let table = Completions::<u32, u32>::new();
        let (pump, handle) = loop_pump();
        table.complete(1, 5);
        let (cancels, cancel) = counted_cancel();
        let mut wait = pump.wait_key(&table, 1).on_cancel(&handle, cancel);
        pump.close();
        block_on(pump.closed()).expect("closed");
        if poll_it {
            assert_eq!(block_on(poll_once(&mut wait)), Some(Err(Error::Closed)));
        }
        drop(wait);
        assert_eq!(table.take(&1), Some(5), "polled {poll_it}");
        assert_eq!(cancels.load(SeqCst), 0, "polled {poll_it}");
    }
    let table = Completions::<u32, u32>::new();
    let (pump, handle) = loop_pump();
    table.complete(1, 5);
    let (cancels, cancel) = counted_cancel();
    let wait = pump.wait_key(&table, 1).on_cancel(&handle, cancel);
    let inside = block_on(handle.call(move |_| block_on(poll_once(wait))));
    assert_eq!(inside, Ok(Some(Err(Error::Reentrant))));
    flush(&handle);
    assert_eq!(table.take(&1), Some(5), "refused inside its pump");
    assert_eq!(cancels.load(SeqCst), 0);
}

/// Found by the same probe: a hook given to a wait that had ended — with its value, or with
/// `KeyInUse` — ran its cancel when the wait was dropped (5 of 5 each), against "not run when
/// the wait gets its value, nor when it fails with `KeyInUse`".
#[test]
fn a_hook_given_to_an_ended_wait_never_runs() {
    use futures_lite::future::{block_on, poll_once};
    let table = Completions::<u32, u32>::new();
    let (pump, handle) = loop_pump();
    table.complete(1, 5);
    let mut got = pump.wait_key(&table, 1);
    assert_eq!(block_on(poll_once(&mut got)), Some(Ok(5)));
    let (after_value, cancel) = counted_cancel();
    drop(got.on_cancel(&handle, cancel));

    let mut holder = pump.wait_key(&table, 2);
    assert!(
        block_on(poll_once(&mut holder)).is_none(),
        "the holder has key 2"
    );
    let mut refused = pump.wait_key(&table, 2);
    assert_eq!(
        block_on(poll_once(&mut refused)),
        Some(Err(Error::KeyInUse))
    );
    let (after_key_in_use, cancel) = counted_cancel();
    let refused = refused.on_cancel(&handle, cancel);
    drop(holder);
    drop(refused);
    flush(&handle);
    assert_eq!(after_value.load(SeqCst), 0, "after its value");
    assert_eq!(after_key_in_use.load(SeqCst), 0, "after `KeyInUse`");
    // Key 1 is free: nothing marked it.
    let mut next = pump.wait_key(&table, 1);
    assert!(block_on(poll_once(&mut next)).is_none(), "key 1 free");
}

/// Found by the same probe: the hook of a wait never polled, whose key another wait has, ran
/// when its pump closed but not when it was dropped (6 of 6): it cancels either way — its work
/// is given up — and leaves the key to the other wait.
#[test]
fn a_dropped_wait_never_polled_cancels_and_leaves_another_waits_key_alone() {
    use futures_lite::future::{block_on, poll_once};
    for same_pump in [true, false] {
        let table = Completions::<u32, u32>::new();
        let ((a, a_loop), (b, _b_loop)) = (loop_pump(), loop_pump());
        let other = if same_pump { &a } else { &b };
        let mut holder = other.wait_key(&table, 1).timeout(common::HANG);
        assert!(
            block_on(poll_once(&mut holder)).is_none(),
            "the holder has key 1"
        );
        let (cancels, cancel) = counted_cancel();
        drop(a.wait_key(&table, 1).on_cancel(&a_loop, cancel));
        flush(&a_loop);
        assert_eq!(cancels.load(SeqCst), 1, "same pump {same_pump}");
        assert_eq!(table.complete(1, 3), None);
        assert_eq!(
            block_on(holder),
            Ok(3),
            "same pump {same_pump}: the key stayed the holder's"
        );
    }
}

/// Blocks the loop's thread until the returned sender sends (or [`common::HANG`] passes).
fn block_loop(handle: &ffi_pump::LoopHandle<()>) -> std::sync::mpsc::Sender<()> {
    let (entered, enter) = std::sync::mpsc::channel();
    let (go, gate) = std::sync::mpsc::channel::<()>();
    handle
        .post(move |_| {
            let _ = entered.send(());
            let _ = gate.recv_timeout(common::HANG);
        })
        .expect("posted");
    enter
        .recv_timeout(common::HANG)
        .expect("the loop's thread is blocked");
    go
}

/// Found in review of the fix above: the hook of a wait dropped unpolled, whose key another wait
/// had, looked at the key again when it ran — and skipped its cancel if that wait had left a
/// value meanwhile, or marked the key (never its wait's) abandoned while it cancelled, so that a
/// new wait got `KeyInUse` and a value completed then was dropped (6 of 6 each). It now cancels
/// and leaves the key alone whatever became of it.
#[test]
fn the_hook_of_a_wait_that_never_had_its_key_cancels_and_leaves_it_alone_when_it_runs() {
    use futures_lite::future::{block_on, poll_once};
    use std::sync::Mutex;
    for holder_takes_its_value in [false, true] {
        let table = Completions::<u32, u32>::new();
        let (pump, handle) = loop_pump();
        let mut holder = pump.wait_key(&table, 1).timeout(common::HANG);
        assert!(
            block_on(poll_once(&mut holder)).is_none(),
            "the holder has key 1"
        );
        let go = block_loop(&handle);
        let seen = Arc::new(Mutex::new(None));
        let (observed, other_pump, other_table) = (seen.clone(), pump.clone(), table.clone());
        drop(pump.wait_key(&table, 1).on_cancel(&handle, move |_| {
            // What another thread sees of key 1 while this cancel runs.
            let look = std::thread::spawn(move || {
                let mut next = other_pump.wait_key(&other_table, 1);
                let polled = block_on(poll_once(&mut next));
                drop(next);
                (polled, other_table.complete(1, 9))
            });
            *observed.lock().expect("unpoisoned") = Some(look.join().expect("the look"));
        }));
        assert_eq!(table.complete(1, 3), None);
        match holder_takes_its_value {
            true => assert_eq!(block_on(holder), Ok(3)),
            false => drop(holder), // its value stays in the table
        }
        go.send(()).expect("the loop's thread waits");
        flush(&handle);
        let looked = seen.lock().expect("unpoisoned").take();
        let (polled, replaced) = looked.expect("the cancel ran");
        let (case, kept) = (holder_takes_its_value, table.take(&1));
        // A new wait on key 1 during the cancel takes the value the holder left, or waits.
        let left_by_the_holder = (!holder_takes_its_value).then_some(Ok(3));
        assert_eq!(polled, left_by_the_holder, "{case}: a new wait on key 1");
        assert_eq!(
            (replaced, kept),
            (None, Some(9)),
            "{case}: completed then, kept"
        );
    }
}
