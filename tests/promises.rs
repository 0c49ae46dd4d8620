//! The promises the docs make at the edges — under panics, re-entrancy, close and a library's
//! own I/O — each as the few lines that once broke it (issue 21: a bus library bound from the
//! docs alone, and hostile probes through the public API).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, within, HANG};
use ffi_pump::{Completions, Error, Pump};

/// Keeps the loop's thread busy in a call until the returned sender sends (or goes): calls
/// made meanwhile stay queued. Returns once the busy call runs.
async fn hold_the_loop_thread<S: 'static>(
    handle: &ffi_pump::LoopHandle<S>,
) -> (std::sync::mpsc::Sender<()>, ffi_pump::Call<()>) {
    let (gate, hold) = std::sync::mpsc::channel::<()>();
    let hold = Mutex::new(hold);
    let started = Arc::new(AtomicBool::new(false));
    let starting = started.clone();
    let busy = handle.call(move |_| {
        starting.store(true, SeqCst);
        let _ = hold.lock().unwrap().recv();
    });
    eventually("the busy call started", || started.load(SeqCst)).await;
    (gate, busy)
}

/// A loop on its own thread with no state, whose runs do nothing.
fn idle_loop() -> (Pump, ffi_pump::LoopHandle<()>) {
    Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts")
}

/// Drops `value` as a cancelled task's drop would: whether a panic came out of it.
fn drop_lets_a_panic_out<T>(value: T) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(value))).is_err()
}

/// Sets its flag, then panics, when dropped.
struct Bomb(Arc<AtomicBool>);

impl Drop for Bomb {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
        panic!("a Drop that panics (expected by this test)");
    }
}

on_every_backend! {
    // 1. `submit`'s cancel runs when the pump closes, on the loop's thread, with the state
    //    still there.
    fn issue_21_submits_cancel_runs_when_the_pump_closes(rt: Rt) {
        rt.block_on(async {
            // The state counts the cancels it saw; its drop records how many that was.
            struct Library {
                cancelled: usize,
                seen_at_drop: Arc<AtomicUsize>,
            }
            impl Drop for Library {
                fn drop(&mut self) {
                    self.seen_at_drop.store(self.cancelled, SeqCst);
                }
            }
            let seen_at_drop = Arc::new(AtomicUsize::new(usize::MAX));
            let record = seen_at_drop.clone();
            let (pump, library) = Pump::builder()
                .build_with_state(
                    move |_| Ok(Library { cancelled: 0, seen_at_drop: record }),
                    |_, _| None,
                )
                .expect("pump thread starts");
            let table = Completions::<u32, ()>::new();
            let waits: Vec<_> = (0..20)
                .map(|id| {
                    let wait = library.submit(
                        &table,
                        id,
                        |_| {},
                        |library: &mut Library| library.cancelled += 1,
                    );
                    rt.spawn(wait)
                })
                .collect();
            common::pending(&pump, 20).await;
            // Calls run in order: once this one ran, every `start` had (a `start` still queued
            // at the close is dropped unrun, and then there is nothing to cancel).
            within("a call", library.call(|_| ())).await.expect("the pump runs");
            pump.close();
            for wait in waits {
                assert_eq!(within("a wait after close", wait).await, Err(Error::Closed));
            }
            within("closed()", pump.closed()).await.expect("closed from outside");
            assert_eq!(
                seen_at_drop.load(SeqCst),
                20,
                "cancels run with the state before it dropped"
            );
        });
    }

    // 2. A factory that panics ends the build with `Panicked`, once the factory did, and
    //    nothing hangs. (The build used to return the pump, poisoned, and its calls said so;
    //    now it waits for the factory and returns no pump, so there is no handle to call.)
    fn issue_21_the_build_ends_with_panicked_when_the_factory_panics(rt: Rt) {
        rt.block_on(async {
            let (go, gate) = std::sync::mpsc::channel::<()>();
            let ran = Arc::new(AtomicBool::new(false));
            let kept = Arc::new(());
            let (in_factory, in_run_once, flag) = (kept.clone(), kept.clone(), ran.clone());
            // The build waits for the factory: it runs on a thread of its own here, so the
            // test can see it wait and then end.
            let (done, built) = async_channel::bounded(1);
            std::thread::spawn(move || {
                let outcome = Pump::builder().build_with_state(
                    move |_| -> Result<u32, ffi_pump::FactoryError> {
                        let _kept = in_factory;
                        let _ = gate.recv();
                        panic!("the factory panics (expected by this test)");
                    },
                    move |_, _| {
                        let _ = &in_run_once;
                        flag.store(true, SeqCst);
                        None
                    },
                );
                let _ = done.send_blocking(outcome.map(drop));
            });
            assert!(built.try_recv().is_err(), "the build returned before its factory did");
            go.send(()).expect("the factory waits");
            let outcome = within("the build", built.recv()).await.expect("the build returns");
            assert_eq!(outcome, Err(Error::Panicked));
            assert!(!ran.load(SeqCst), "run_once ran without a state");
            eventually("the factory and run_once are dropped", || Arc::strong_count(&kept) == 1)
                .await;
        });
    }

    // 3. A cancel that panics still lets go of its key: the next wait on it gets its value.
    fn issue_21_a_panicking_cancel_frees_its_key(rt: Rt) {
        rt.block_on(async {
            let (pump, handle) = idle_loop();
            let table = Completions::<u32, u32>::new();
            let outcome = handle
                .submit(&table, 7, |_| {}, |_| panic!("a cancel that panics (expected by this test)"))
                .timeout(Duration::from_millis(20))
                .await;
            assert_eq!(outcome, Err(Error::TimedOut));
            // Calls run in order: once this one ran, so had the cancel.
            within("a call", handle.call(|_| ())).await.expect("the pump goes on");
            table.complete(7, 1);
            assert_eq!(table.take(&7), Some(1), "a value for the key is kept again");
            let waiting = rt.spawn(pump.wait_key(&table, 7).timeout(HANG));
            common::pending(&pump, 1).await;
            table.complete(7, 2);
            assert_eq!(waiting.await, Ok(2), "a new wait holds the key");
            assert!(!pump.is_closed(), "a panicking cancel does not stop the pump");
        });
    }

    // 4. A `Drop` that panics in what `run_once` captured never aborts (it did on smol, where
    //    the closure went with the driver's task), nor lands in a task that happened to drop
    //    it: waits end `Closed`.
    fn issue_21_a_panicking_drop_of_run_once_never_aborts(rt: Rt) {
        rt.block_on(async {
            for with_a_wait in [false, true] {
                let dropped = Arc::new(AtomicBool::new(false));
                let bomb = Bomb(dropped.clone());
                let pump = Pump::new(move || {
                    let _ = &bomb;
                });
                pump.spawn_on(rt.backend()).expect("backend available");
                within("a turn", pump.turn()).await.expect("the pump runs");
                // The wait holds the pump's insides, not a handle: dropping `pump` closes it.
                let waiting = with_a_wait.then(|| rt.spawn(pump.wait_until(|| false)));
                if with_a_wait {
                    common::pending(&pump, 1).await;
                }
                // The last handle: the pump closes, and the closure goes with the last internal
                // reference, wherever that is (the driver's task, the waiting task).
                drop(pump);
                if let Some(waiting) = waiting {
                    assert_eq!(within("the wait", waiting).await, Err(Error::Closed));
                }
                eventually("the closure was dropped", || dropped.load(SeqCst)).await;
            }
        });
    }

    // 4. The same for the state of a loop on its thread: `closed()` returns, and the pump
    //    reports the panic.
    fn issue_21_a_panicking_drop_of_the_state_is_reported(rt: Rt) {
        rt.block_on(async {
            let dropped = Arc::new(AtomicBool::new(false));
            let flag = dropped.clone();
            let (pump, _handle) = Pump::builder()
                .build_with_state(move |_| Ok(Bomb(flag)), |_, _| None)
                .expect("pump thread starts");
            pump.close();
            within("closed()", pump.closed()).await.expect("closed from outside");
            assert!(dropped.load(SeqCst), "the state was dropped");
            assert!(pump.stats().panicked, "the panic is reported: {:?}", pump.stats());
        });
    }

    // The drops of what checks and calls captured: a check's after its wait completed, a
    // call's and a post's dropped unrun at the close. Each panic stays in the pump, which goes
    // on (checks) or ends as it would (calls); nothing lands in the caller's task.
    fn issue_21_panicking_drops_of_checks_and_calls_stay_in_the_pump(rt: Rt) {
        rt.block_on(async {
            let pump = rt.pump_with(Pump::builder(), || {});
            let dropped = Arc::new(AtomicBool::new(false));
            let bomb = Bomb(dropped.clone());
            let outcome = within("a wait whose check holds a bomb", pump.wait_until(move || {
                let _ = &bomb;
                true
            }))
            .await;
            assert_eq!(outcome, Ok(()));
            eventually("the check was dropped", || dropped.load(SeqCst)).await;
            within("a turn after", pump.turn()).await.expect("the pump goes on");
            assert!(!pump.stats().panicked);

            // Two checks that complete in the same pass leave the registry together: each one's
            // panicking drop is caught on its own (a second panic while the first unwinds
            // would abort the process).
            let ready = Arc::new(AtomicBool::new(false));
            let bombs: Vec<_> = (0..2).map(|_| Arc::new(AtomicBool::new(false))).collect();
            let waits: Vec<_> = bombs
                .iter()
                .map(|dropped| {
                    let (bomb, ready) = (Bomb(dropped.clone()), ready.clone());
                    rt.spawn(pump.wait_until(move || {
                        let _ = &bomb;
                        ready.load(SeqCst)
                    }))
                })
                .collect();
            common::pending(&pump, 2).await;
            ready.store(true, SeqCst);
            within("a turn", pump.turn()).await.expect("the pump runs");
            for wait in waits {
                assert_eq!(within("a wait whose check holds a bomb", wait).await, Ok(()));
            }
            eventually("both checks were dropped", || bombs.iter().all(|b| b.load(SeqCst))).await;
            assert!(!pump.stats().panicked);

            let (pump, handle) = idle_loop();
            // The loop's thread kept busy, so the next two calls stay queued.
            let (gate, busy) = hold_the_loop_thread(&handle).await;
            let (call_dropped, post_dropped) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
            let bomb = Bomb(call_dropped.clone());
            let queued_call = handle.call(move |_| drop(bomb));
            let bomb = Bomb(post_dropped.clone());
            handle.post(move |_| drop(bomb)).expect("posted");
            pump.close();
            gate.send(()).expect("the busy call waits");
            assert_eq!(within("the busy call", busy).await, Ok(()));
            assert_eq!(within("the queued call", queued_call).await, Err(Error::Closed));
            within("closed()", pump.closed()).await.expect("closed from outside");
            assert!(call_dropped.load(SeqCst) && post_dropped.load(SeqCst), "dropped unrun");
        });
    }

    // A broadcast check runs in its wait's own poll: its panic resumes there, and the pump and
    // the other waits go on.
    fn issue_21_a_panicking_broadcast_check_fails_its_own_wait_only(rt: Rt) {
        rt.block_on(async {
            let pump = rt.pump_with(Pump::builder().strategy(ffi_pump::Strategy::Broadcast), || {});
            let panicking = futures_lite::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
                pump.wait_until(|| panic!("a broadcast check that panics (expected by this test)")),
            ))
            .await;
            assert!(panicking.is_err(), "the panic resumes in the awaiting task");
            let rounds = pump.stats().rounds;
            let probe = pump.clone();
            within("another wait", pump.wait_until(move || probe.stats().rounds > rounds))
                .await
                .expect("the pump goes on");
        });
    }

    // 5. `closed()` from inside the pump is refused instead of waiting for itself: in a
    //    check, in a call, in `run_once`.
    fn issue_21_closed_from_inside_the_pump_is_refused(rt: Rt) {
        rt.block_on(async {
            let pump = rt.pump_with(Pump::builder(), || {});
            let probe = pump.clone();
            let in_check = within(
                "a check awaiting closed()",
                pump.wait_for(move || Some(futures_lite::future::block_on(probe.closed()))),
            )
            .await;
            assert_eq!(in_check, Ok(Err(Error::Reentrant)));

            let (on_thread, handle) = idle_loop();
            let probe = on_thread.clone();
            let in_call = within(
                "a call awaiting closed()",
                handle.call(move |_| {
                    probe.close();
                    futures_lite::future::block_on(probe.closed())
                }),
            )
            .await;
            assert_eq!(in_call, Ok(Err(Error::Reentrant)));

            let slot: Arc<Mutex<Option<Pump>>> = Arc::default();
            let seen: Arc<Mutex<Option<Result<(), Error>>>> = Arc::default();
            let (inner, record) = (slot.clone(), seen.clone());
            let pump = Pump::new(move || {
                if let Some(me) = inner.lock().unwrap().take() {
                    *record.lock().unwrap() = Some(futures_lite::future::block_on(me.closed()));
                }
            });
            pump.spawn_on(rt.backend()).expect("backend available");
            *slot.lock().unwrap() = Some(pump.clone());
            within("a turn", pump.turn()).await.expect("the pump runs");
            assert_eq!(*seen.lock().unwrap(), Some(Err(Error::Reentrant)));
        });
    }

    // 6. Nested pumps: A's `run_once` turns B, whose `run_once` calls back into A, all on one
    //    thread. A's calls there are refused; nothing deadlocks.
    fn issue_21_nested_pumps_refuse_reentry(rt: Rt) {
        rt.block_on(async {
            type Slot = Arc<Mutex<Option<Pump>>>;
            let (a_slot, b_slot): (Slot, Slot) = Default::default();
            let seen: Arc<Mutex<Vec<Result<(), Error>>>> = Arc::default();
            // An hour's interval: neither driver runs by itself, so the turns run inline.
            let quiet = || Pump::builder().interval(Duration::from_secs(3600));
            let (to_b, record) = (b_slot.clone(), seen.clone());
            let a = quiet()
                .build(move || {
                    if let Some(b) = to_b.lock().unwrap().clone() {
                        let turned = futures_lite::future::block_on(b.turn());
                        record.lock().unwrap().push(turned);
                    }
                })
                .expect("valid settings");
            let (to_a, record) = (a_slot.clone(), seen.clone());
            let b = quiet()
                .build(move || {
                    if let Some(a) = to_a.lock().unwrap().clone() {
                        let turned = futures_lite::future::block_on(a.turn());
                        let waited = futures_lite::future::block_on(a.wait_until(|| true));
                        record.lock().unwrap().extend([turned, waited]);
                    }
                })
                .expect("valid settings");
            a.spawn_on(rt.backend()).expect("backend available");
            b.spawn_on(rt.backend()).expect("backend available");
            *a_slot.lock().unwrap() = Some(a.clone());
            *b_slot.lock().unwrap() = Some(b.clone());
            within("A's turn", a.turn()).await.expect("A runs");
            // Break the cycle of handles, so both pumps can close.
            a_slot.lock().unwrap().take();
            b_slot.lock().unwrap().take();
            let seen = seen.lock().unwrap().clone();
            assert!(
                seen.starts_with(&[Err(Error::Reentrant), Err(Error::Reentrant), Ok(())]),
                "B's run refused A's turn and wait, then A's turn of B finished: {seen:?}"
            );
        });
    }

    // 7. A value completed for a wait is that wait's: a second wait on the key, between the
    //    completion and the first wait's next poll, gets `KeyInUse`.
    fn issue_21_a_woken_waits_value_cannot_be_stolen(rt: Rt) {
        rt.block_on(async {
            let pump = rt.pump_with(Pump::builder(), || {});
            let table = Completions::<u32, u32>::new();
            let mut first = Box::pin(pump.wait_key(&table, 1));
            assert!(futures_lite::future::poll_once(first.as_mut()).await.is_none());
            table.complete(1, 5);
            assert_eq!(pump.wait_key(&table, 1).await, Err(Error::KeyInUse));
            assert_eq!(table.take(&1), None, "take does not steal it either");
            assert_eq!(within("the first wait", first).await, Ok(5));

            // The same with real tasks: the first wait always gets its value.
            for round in 0..20 {
                let first = rt.spawn(pump.wait_key(&table, round).timeout(HANG));
                common::pending(&pump, 1).await;
                table.complete(round, round);
                let second = pump.wait_key(&table, round).timeout(Duration::from_millis(5)).await;
                assert!(
                    matches!(second, Err(Error::KeyInUse | Error::TimedOut)),
                    "round {round}: the second wait got {second:?}"
                );
                assert_eq!(first.await, Ok(round), "round {round}");
            }
        });
    }

    // Cancel hooks at the edges of a wait's life. A wait with a cancel hook dropped before its
    // first poll leaves another wait's key alone; a key that completed in the last run before
    // the close is not cancelled (its wait takes the value); a `start` dropped unrun at the
    // close is not cancelled either.
    fn issue_21_cancel_hooks_run_only_for_work_that_started_and_did_not_finish(rt: Rt) {
        rt.block_on(async {
            let cancels = Arc::new(AtomicUsize::new(0));
            let count = |cancels: &Arc<AtomicUsize>| {
                let cancels = cancels.clone();
                move |_: &mut ()| {
                    cancels.fetch_add(1, SeqCst);
                }
            };
            let (pump, handle) = idle_loop();
            let table = Completions::<u32, u32>::new();

            // Another wait's key: an unpolled second submit on it, dropped, leaves it alone.
            let first = rt.spawn(handle.submit(&table, 1, |_| {}, count(&cancels)).timeout(HANG));
            common::pending(&pump, 1).await;
            drop(handle.submit(&table, 1, |_| {}, count(&cancels)));
            within("a call", handle.call(|_| ())).await.expect("the pump runs");
            table.complete(1, 10);
            assert_eq!(first.await, Ok(10), "the first wait keeps its key");
            assert_eq!(cancels.load(SeqCst), 0, "no cancel: one wait finished, one never had the key");

            // Completed in the last run before the close: the wait gets its value, no cancel.
            let waiting = rt.spawn(handle.submit(&table, 2, |_| {}, count(&cancels)).timeout(HANG));
            common::pending(&pump, 1).await;
            let (done, probe) = (table.clone(), pump.clone());
            within(
                "a call that completes and closes",
                handle.call(move |_| {
                    done.complete(2, 20);
                    probe.close();
                }),
            )
            .await
            .expect("the call runs");
            assert_eq!(waiting.await, Ok(20));
            within("closed()", pump.closed()).await.expect("closed from outside");
            assert_eq!(cancels.load(SeqCst), 0, "a completed key is not cancelled");

            // `start` dropped unrun at the close: nothing to cancel.
            let (pump, handle) = idle_loop();
            let (gate, busy) = hold_the_loop_thread(&handle).await;
            let started = Arc::new(AtomicBool::new(false));
            let flag = started.clone();
            let waiting = rt.spawn(
                handle.submit(&table, 3, move |_| flag.store(true, SeqCst), count(&cancels)),
            );
            common::pending(&pump, 1).await;
            pump.close();
            gate.send(()).expect("the busy call waits");
            assert_eq!(within("the busy call", busy).await, Ok(()));
            assert_eq!(within("the wait", waiting).await, Err(Error::Closed));
            within("closed()", pump.closed()).await.expect("closed from outside");
            assert!(!started.load(SeqCst), "start was dropped unrun");
            assert_eq!(cancels.load(SeqCst), 0, "nothing started, nothing cancelled");
        });
    }

    // A call whose caller left, and whose value panics as it is dropped on the loop's thread,
    // does not cost the calls queued after it.
    fn issue_21_a_panicking_drop_of_a_calls_value_spares_the_rest_of_the_batch(rt: Rt) {
        rt.block_on(async {
            let (pump, handle) = idle_loop();
            let (gate, busy) = hold_the_loop_thread(&handle).await;
            let dropped = Arc::new(AtomicBool::new(false));
            let flag = dropped.clone();
            drop(handle.call(move |_| Bomb(flag))); // nobody takes its value
            let after = Arc::new(AtomicBool::new(false));
            let ran = after.clone();
            handle.post(move |_| ran.store(true, SeqCst)).expect("posted");
            gate.send(()).expect("the busy call waits");
            assert_eq!(within("the busy call", busy).await, Ok(()));
            within("a call after", handle.call(|_| ())).await.expect("the pump goes on");
            assert!(dropped.load(SeqCst), "the value was dropped");
            assert!(after.load(SeqCst), "the post queued after it ran");
            assert!(!pump.is_closed());
        });
    }
}

/// Found by a hostile probe: a `submit` on a key whose last wait gave up, its cancel still
/// queued behind a slow call on the loop's thread, ended with `KeyInUse` — and its `start` ran
/// all the same: work that nobody would cancel, whose value then answered the next submit on
/// the key. The key is now taken when `submit` is called, and `start` goes only with it.
#[test]
fn a_submit_on_a_key_in_use_starts_nothing() {
    async_io::block_on(async {
        let (_pump, handle) = Pump::builder()
            .build_with_state(|_| Ok(Vec::<&'static str>::new()), |_, _| None)
            .expect("pump thread starts");
        let table = Completions::<u32, &'static str>::new();
        let submit = |tag: &'static str| {
            let start = move |started: &mut Vec<&'static str>| started.push(tag);
            let cancel = move |started: &mut Vec<&'static str>| started.retain(|&t| t != tag);
            handle.submit(&table, 1, start, cancel)
        };
        let first = submit("first").timeout(Duration::from_millis(20));
        within("a call", handle.call(|_| ()))
            .await
            .expect("started");
        let (gate, busy) = hold_the_loop_thread(&handle).await;
        assert_eq!(first.await, Err(Error::TimedOut));
        // The first wait's cancel waits behind the busy call: the key is not free yet.
        let second = submit("second").timeout(Duration::from_millis(20)).await;
        assert_eq!(second, Err(Error::KeyInUse));
        gate.send(()).expect("the busy call waits");
        within("the busy call", busy).await.expect("it ran");
        let started = handle.call(|started| started.clone());
        let started = within("a call", started).await.expect("it ran");
        assert_eq!(
            started,
            Vec::<&str>::new(),
            "the first cancelled, the second never started"
        );

        let third = submit("third").timeout(HANG);
        let table = table.clone();
        let finish = handle.call(move |started| {
            for tag in started.drain(..) {
                table.complete(1, tag);
            }
        });
        within("a call", finish).await.expect("it ran");
        assert_eq!(third.await, Ok("third"), "its own value, nothing left over");
    });
}

// 8, which needs the descriptor set (epoll).
#[cfg(any(target_os = "linux", target_os = "android"))]
mod io {
    use super::*;
    use crate::on_every_backend;
    use std::io::{ErrorKind, Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    on_every_backend! {
        // 8. Data a library queues with nobody waiting goes out: readiness of its descriptors
        //    runs an idle pump (here: 4 MiB through a socket whose buffer holds far less).
        fn issue_21_a_write_queued_with_nobody_waiting_goes_out(rt: Rt) {
            rt.block_on(async {
                const SIZE: usize = 4 << 20;
                let (socket, mut peer) = UnixStream::pair().expect("socket pair");
                socket.set_nonblocking(true).expect("non-blocking");
                let reader = std::thread::spawn(move || {
                    let mut data = Vec::new();
                    peer.set_read_timeout(Some(HANG / 2)).expect("read timeout");
                    while data.len() < SIZE {
                        let mut chunk = vec![0; 64 << 10];
                        match peer.read(&mut chunk) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => data.extend_from_slice(&chunk[..n]),
                        }
                    }
                    data.len()
                });
                let (pump, library) = Pump::builder()
                    .build_with_state(
                        move |setup| Ok(Sender { descriptors: setup.descriptors()?, socket, left: 0 }),
                        Sender::run_once,
                    )
                    .expect("pump thread starts");
                library
                    .call(|sender| sender.send(SIZE))
                    .await
                    .expect("the call runs")
                    .expect("the socket can be watched");
                let started = Instant::now();
                eventually("the reader has every byte or gave up", || reader.is_finished()).await;
                assert_eq!(
                    reader.join().expect("the reader thread"),
                    SIZE,
                    "every byte went out with no wait pending ({:?}, {} rounds)",
                    started.elapsed(),
                    pump.stats().rounds
                );
                assert_eq!(pump.stats().pending_waits, 0);
            });
        }
    }

    /// A library that queues data and writes it when its socket is writable.
    struct Sender {
        descriptors: ffi_pump::Descriptors,
        socket: UnixStream,
        left: usize,
    }

    impl Sender {
        fn send(&mut self, bytes: usize) -> std::io::Result<()> {
            self.left += bytes;
            let fd = self.socket.as_raw_fd();
            self.descriptors.watch(fd, ffi_pump::Interest::WRITABLE, 0)
        }

        fn run_once(&mut self, _run: &ffi_pump::Run<'_>) -> Option<Instant> {
            let chunk = [7_u8; 64 << 10];
            while self.left > 0 {
                match self.socket.write(&chunk[..self.left.min(chunk.len())]) {
                    Ok(n) => self.left -= n,
                    Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                    Err(err) => panic!("write: {err}"),
                }
            }
            if self.left == 0 {
                let _ = self.descriptors.unwatch(0);
            }
            None
        }
    }
}

/// Two waits whose checks are one closure type, so they share a registry column and a block:
/// the first, once armed, drops the second from inside its check.
mod a_wait_dropped_from_a_check {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};

    use ffi_pump::Error;
    use futures_lite::future::{block_on, poll_once};

    type Wait = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

    #[derive(Default)]
    struct Shared {
        armed: AtomicBool,
        victim: Mutex<Option<Wait>>,
        dropped: AtomicBool,
        checked_after_drop: AtomicUsize,
    }

    fn check(shared: Arc<Shared>, dropper: bool) -> impl FnMut() -> bool + Send + 'static {
        move || match dropper {
            true if shared.armed.load(SeqCst) => {
                drop(shared.victim.lock().unwrap().take());
                shared.dropped.store(true, SeqCst);
                true
            }
            true => false,
            false => {
                if shared.dropped.load(SeqCst) {
                    shared.checked_after_drop.fetch_add(1, SeqCst);
                }
                false
            }
        }
    }

    #[test]
    fn never_has_its_check_called_again_even_in_the_droppers_block() {
        // Regression (found in review): whether a block's checks look at their waits' marks
        // was decided when the block was entered; a wait dropped from a check of that block
        // still had its check called later in it ("never called again once the drop
        // returned", and its C object may be gone by then).
        block_on(async {
            let pump = crate::common::turned_only();
            let shared = Arc::new(Shared::default());
            let mut dropper = Box::pin(pump.wait_until(check(shared.clone(), true)));
            assert!(poll_once(&mut dropper).await.is_none());
            let mut victim: Wait = Box::pin(pump.wait_until(check(shared.clone(), false)));
            assert!(poll_once(&mut victim).await.is_none());
            *shared.victim.lock().unwrap() = Some(victim);
            shared.armed.store(true, SeqCst);
            pump.turn().await.expect("a turn");
            dropper.await.expect("the dropper's check held");
            assert!(shared.dropped.load(SeqCst));
            assert_eq!(
                shared.checked_after_drop.load(SeqCst),
                0,
                "checked after its drop"
            );
            assert_eq!(pump.stats().pending_waits, 0);
        });
    }
}

#[test]
fn waits_ended_by_a_close_or_a_refused_registration_are_no_longer_counted_pending() {
    futures_lite::future::block_on(async {
        let pump = common::turned_only();
        let mut waits: Vec<_> = (0..200)
            .map(|_| Box::pin(pump.wait_until(|| false)))
            .collect();
        for wait in &mut waits {
            assert!(futures_lite::future::poll_once(wait).await.is_none());
        }
        assert_eq!(pump.stats().pending_waits, 200);
        // Half dropped before the close, half ended by it.
        let rest = waits.split_off(100);
        drop(waits);
        pump.close();
        for wait in rest {
            assert_eq!(wait.await, Err(Error::Closed));
        }
        assert_eq!(pump.stats().pending_waits, 0);

        // A registration refused: another thread closes the pump during the first check.
        let pump = common::turned_only();
        let other = pump.clone();
        let mut first = true;
        let outcome = pump
            .wait_until(move || {
                if std::mem::take(&mut first) {
                    let other = other.clone();
                    std::thread::spawn(move || other.close()).join().unwrap();
                }
                false
            })
            .await;
        assert_eq!(outcome, Err(Error::Closed));
        assert_eq!(pump.stats().pending_waits, 0);
    });
}

on_every_backend! {
    fn a_kick_while_a_turn_runs_the_loop_causes_one_more_run_after_it(rt: Rt) {
        // Regression (found in review): the driver took the kick, found the turn's run under
        // way and joined it as if it were the kick's — a run that started before the kick.
        rt.block_on(async move {
            let (entered, has_entered) = std::sync::mpsc::channel();
            let (release, released) = std::sync::mpsc::channel::<()>();
            let runs = Arc::new(AtomicUsize::new(0));
            let counted = runs.clone();
            let pump = rt.pump_with(Pump::builder().interval(Duration::from_secs(3600)), move || {
                if counted.fetch_add(1, SeqCst) == 0 {
                    entered.send(()).expect("the test waits");
                    released.recv_timeout(HANG).expect("the test releases the run");
                }
            });
            let turning = pump.clone();
            let turn = std::thread::spawn(move || {
                futures_lite::future::block_on(common::within("a turn", turning.turn()))
            });
            has_entered.recv_timeout(HANG).expect("the turn's run started");
            pump.kick();
            // Time for the driver to take the kick while the run is under way (nothing to await:
            // it shows nothing until it runs). Without it the test passes either way.
            std::thread::sleep(Duration::from_millis(100));
            release.send(()).expect("the run waits");
            turn.join().expect("the turn ends").expect("the turn ran");
            eventually("the kick's run after the turn's", || runs.load(SeqCst) >= 2).await;
            pump.close();
        });
    }
}

mod a_wait_that_gives_up_after_its_check_held {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::{mpsc, Arc, Mutex};

    use crate::common::{self, HANG};
    use futures_lite::future::{block_on, poll_once};

    /// What the waits' checks share; one closure type for all, so they share a column.
    struct Scene {
        armed: AtomicBool,
        first_calls: AtomicUsize,
        /// Drops of what the first wait's check captured.
        first_drops: AtomicUsize,
        started: Mutex<Option<mpsc::Sender<()>>>,
        let_go: Mutex<Option<mpsc::Receiver<()>>>,
    }

    /// What a check captures: the scene, and whether its drop is the first wait's.
    struct Captured {
        scene: Arc<Scene>,
        first: bool,
    }

    impl Drop for Captured {
        fn drop(&mut self) {
            if self.first {
                self.scene.first_drops.fetch_add(1, SeqCst);
            }
        }
    }

    /// Role 0 holds once armed; 1 never holds; 2, once armed, holds the pass in its check until
    /// the test says the first wait was dropped.
    fn check(scene: Arc<Scene>, role: u8) -> impl FnMut() -> bool + Send + 'static {
        let captured = Captured {
            scene,
            first: role == 0,
        };
        move || match (role, &captured.scene) {
            (0, scene) => {
                scene.first_calls.fetch_add(1, SeqCst);
                scene.armed.load(SeqCst)
            }
            (2, scene) if scene.armed.load(SeqCst) => {
                if let Some(started) = scene.started.lock().unwrap().take() {
                    started.send(()).expect("the dropping thread waits");
                    let let_go = scene.let_go.lock().unwrap().take().expect("taken once");
                    let_go
                        .recv_timeout(HANG)
                        .expect("the first wait was dropped");
                }
                false
            }
            _ => false,
        }
    }

    #[test]
    fn is_let_go_once_and_never_checked_again() {
        // A pass tells the waits its checks ended after its walk over their column; the first
        // wait here gives up in between (its check held in block 0, the walk is in block 1).
        block_on(async {
            let pump = common::turned_only();
            let (started, has_started) = mpsc::channel();
            let (dropped, let_go) = mpsc::channel();
            let scene = Arc::new(Scene {
                armed: AtomicBool::new(false),
                first_calls: AtomicUsize::new(0),
                first_drops: AtomicUsize::new(0),
                started: Mutex::new(Some(started)),
                let_go: Mutex::new(Some(let_go)),
            });
            // Keys 0 (the first), 1 – 69, 70 (block 1, the one that holds the pass).
            let mut waits: Vec<_> = (0..=70)
                .map(|key| {
                    let role = match key {
                        0 => 0,
                        70 => 2,
                        _ => 1,
                    };
                    Box::pin(pump.wait_until(check(scene.clone(), role)))
                })
                .collect();
            for wait in &mut waits {
                assert!(poll_once(wait).await.is_none());
            }
            assert_eq!(pump.stats().pending_waits, 71);
            let first = waits.remove(0);
            let dropper = std::thread::spawn(move || {
                has_started
                    .recv_timeout(HANG)
                    .expect("the pass reached block 1");
                drop(first);
                dropped.send(()).expect("the check waits");
            });
            scene.armed.store(true, SeqCst);
            pump.turn().await.expect("a turn");
            dropper.join().expect("the dropping thread ends");
            assert_eq!(
                scene.first_calls.load(SeqCst),
                2,
                "registration, then the turn"
            );
            assert_eq!(pump.stats().pending_waits, 70, "uncounted once");
            assert_eq!(
                scene.first_drops.load(SeqCst),
                1,
                "its entry left the registry with the pass: what its check captured was dropped"
            );
            pump.turn().await.expect("another turn");
            assert_eq!(scene.first_calls.load(SeqCst), 2, "never checked again");
            drop(waits);
            assert_eq!(pump.stats().pending_waits, 0);
        });
    }
}

/// Found by a hostile probe: a `wait_for` whose deadline passed while its check, running on the
/// pump, was handing out its value (taking it out of the library) ended with `TimedOut`, and the
/// value was dropped with the wait's state. A wait that is ready wins over its deadline: the
/// timeout waits for the pass under way and hands the value over.
#[test]
fn a_value_its_check_handed_out_as_the_deadline_passed_is_not_lost() {
    let pump = Pump::builder().build(|| {}).expect("valid settings");
    pump.spawn_on(ffi_pump::Backend::Thread).expect("a thread");
    let (calls, handed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (calling, handing) = (calls.clone(), handed.clone());
    let outcome = async_io::block_on(
        pump.wait_for(move || {
            // The first poll's own check finds nothing; the pump's, slow, hands out the value.
            if calling.fetch_add(1, SeqCst) == 0 {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
            handing.fetch_add(1, SeqCst);
            Some(200_u16)
        })
        .timeout(Duration::from_millis(30)),
    );
    assert_eq!(
        handed.load(SeqCst),
        1,
        "the check handed its value out once"
    );
    assert_eq!(outcome, Ok(200), "and the wait has it");
    assert_eq!(pump.stats().pending_waits, 0);
}

/// The same without a slow check: waits whose values appear as their deadlines pass, on a
/// two-worker tokio runtime; every value a check handed out reaches its wait (before the fix,
/// values were lost in 16 of 20 runs of this test).
#[cfg(feature = "tokio")]
#[test]
fn no_value_a_check_hands_out_is_lost_to_a_deadline_passing_at_the_same_time() {
    use std::time::Instant;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let pump = Pump::builder()
            .interval(Duration::from_micros(200))
            .build(|| {})
            .expect("valid settings");
        pump.spawn();
        let (handed, received) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        for _ in 0..20 {
            let waits: Vec<_> = (0..200_u64)
                .map(|i| {
                    let (pump, handed, received) = (pump.clone(), handed.clone(), received.clone());
                    tokio::spawn(async move {
                        let timeout = Duration::from_micros(2_000 + (i % 20) * 50);
                        let due = Instant::now() + timeout;
                        let mut first = true;
                        let check = move || {
                            if std::mem::take(&mut first) || Instant::now() < due {
                                return None;
                            }
                            handed.fetch_add(1, SeqCst);
                            Some(i)
                        };
                        if pump.wait_for(check).timeout(timeout).await == Ok(i) {
                            received.fetch_add(1, SeqCst);
                        }
                    })
                })
                .collect();
            for wait in waits {
                within("a wait", wait).await.expect("the task ends");
            }
        }
        assert_eq!(handed.load(SeqCst), received.load(SeqCst), "values lost");
        assert_eq!(pump.stats().pending_waits, 0);
    });
}

/// Found by a randomized stress probe: on a closed pump a wait, a call and a post return at once
/// and dropped their closure there, uncaught: its panicking `Drop` landed in the caller. And a
/// check that runs in the waiting task (`Strategy::Broadcast`, `wait_until_local`), or a wait
/// never polled, dropped its check in the task that dropped the wait.
#[test]
fn a_panicking_drop_of_a_closure_on_a_closed_pump_or_in_a_wait_stays_out_of_the_caller() {
    use futures_lite::FutureExt;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    let bomb = || Bomb(Arc::new(AtomicBool::new(false)));
    futures_lite::future::block_on(async {
        let pump = Pump::new(|| {});
        pump.spawn();
        pump.turn().await.expect("open");
        pump.close();
        let armed = bomb();
        let wait = pump.wait_until(move || {
            let _ = &armed;
            false
        });
        let outcome = AssertUnwindSafe(wait).catch_unwind().await;
        assert!(
            matches!(outcome, Ok(Err(Error::Closed))),
            "a wait on a closed pump"
        );

        let (pump, handle) = idle_loop();
        pump.close();
        pump.closed().await.expect("closed");
        let armed = bomb();
        let post = catch_unwind(AssertUnwindSafe(|| handle.post(move |_| drop(armed))));
        assert!(
            matches!(post, Ok(Err(Error::Closed))),
            "a post on a closed pump"
        );
        let armed = bomb();
        let call = catch_unwind(AssertUnwindSafe(|| handle.call(move |_| drop(armed))));
        let call = call.expect("a call on a closed pump: no panic in the caller");
        assert_eq!(call.await, Err(Error::Closed));
        let (armed, also_armed) = (bomb(), bomb());
        let request = catch_unwind(AssertUnwindSafe(|| {
            handle.request(
                move |_, done: ffi_pump::Completer<u8>| {
                    drop(armed);
                    done.complete(1)
                },
                move |_, ()| drop(also_armed),
            )
        }));
        let request = request.expect("a request on a closed pump: no panic in the caller");
        assert_eq!(request.await, Err(Error::Closed));

        // Refused for its key (the first wait holds it), on an open pump.
        let (_pump, handle) = idle_loop();
        let table = ffi_pump::Completions::<u8, u8>::new();
        let first = handle.submit(&table, 1, |_| {}, |_| {});
        let (armed, also_armed) = (bomb(), bomb());
        let second = catch_unwind(AssertUnwindSafe(|| {
            handle.submit(&table, 1, move |_| drop(armed), move |_| drop(also_armed))
        }));
        let second = second.expect("a submit refused its key: no panic in the caller");
        assert_eq!(second.await, Err(Error::KeyInUse));
        drop(first);
    });

    for strategy in common::STRATEGIES {
        for local in [false, true] {
            futures_lite::future::block_on(async {
                let pump = Pump::builder()
                    .strategy(strategy)
                    .build(|| {})
                    .expect("valid");
                pump.spawn();
                let armed = bomb();
                let check = move || {
                    let _ = &armed;
                    true
                };
                let mut wait = match local {
                    false => pump.wait_until(check).boxed(),
                    true => pump.wait_until_local(check).boxed_local(),
                };
                assert_eq!(wait.as_mut().await, Ok(()));
                let dropped = catch_unwind(AssertUnwindSafe(move || drop(wait)));
                assert!(
                    dropped.is_ok(),
                    "{strategy:?}, local: {local}: a finished wait's drop"
                );
                let armed = bomb();
                let never_polled = pump.wait_until(move || {
                    let _ = &armed;
                    true
                });
                let dropped = catch_unwind(AssertUnwindSafe(move || drop(never_polled)));
                assert!(dropped.is_ok(), "{strategy:?}: a wait never polled");
                pump.close();
            });
        }
    }
}

/// Found by a randomized stress probe: after `close()`, the panicking `Drop` of what `run_once`
/// captured (run as `closed()` drops the loop) replaced the close's reason, and every later wait
/// and turn got `Panicked` instead of `Closed`. It is reported in `Stats::panicked` only.
#[test]
fn waits_end_with_closed_when_run_onces_drop_panics_after_a_close() {
    for backend in [ffi_pump::Backend::Smol, ffi_pump::Backend::Thread] {
        smol::block_on(async {
            let armed = Bomb(Arc::new(AtomicBool::new(false)));
            let pump = Pump::new(move || {
                let _ = &armed;
            });
            pump.spawn_on(backend).expect("backend");
            pump.turn().await.expect("open");
            let waiting = pump.clone();
            let pending = smol::spawn(async move { waiting.wait_until(|| false).await });
            common::pending(&pump, 1).await;
            pump.close();
            pump.closed().await.expect("closed by close()");
            assert_eq!(
                pending.await,
                Err(Error::Closed),
                "{backend:?}: pending at the close"
            );
            let later = pump.wait_until(|| false).await;
            assert_eq!(
                later,
                Err(Error::Closed),
                "{backend:?}: a wait after the close"
            );
            assert_eq!(
                pump.turn().await,
                Err(Error::Closed),
                "{backend:?}: a turn after"
            );
            assert!(pump.stats().panicked, "{backend:?}: reported");
        });
    }
}

/// A request that gave up before its library finished, then answered with a value whose drop
/// panics, while its cancel waits its turn on the loop's thread: the value is dropped in
/// `complete`, here on a library thread of its own, with its panic caught (before, it came out
/// of `complete`; in `run_once` it closed the pump with `Panicked`). Found by a hostile probe.
#[test]
fn a_value_answering_a_request_that_gave_up_is_dropped_with_its_panic_caught() {
    futures_lite::future::block_on(async {
        let (pump, handle) = idle_loop();
        let (started, completer) = std::sync::mpsc::channel();
        let mut request = Box::pin(handle.request(
            move |_, done: ffi_pump::Completer<Bomb>| started.send(done).expect("the test waits"),
            |_, ()| {},
        ));
        assert!(futures_lite::future::poll_once(request.as_mut())
            .await
            .is_none());
        let completer = completer.recv_timeout(HANG).expect("started");
        // Its cancel stays queued behind the busy call.
        let (gate, busy) = hold_the_loop_thread(&handle).await;
        drop(request);
        let dropped = Arc::new(AtomicBool::new(false));
        let bomb = Bomb(dropped.clone());
        let completed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            completer.complete(bomb)
        }));
        assert!(completed.is_ok(), "the panic came out of complete");
        assert!(dropped.load(SeqCst), "nobody takes the value: dropped");
        gate.send(()).expect("the busy call waits");
        assert_eq!(within("the busy call", busy).await, Ok(()));
        assert_eq!(within("a call after", handle.call(|_| 1)).await, Ok(1));
        drop(pump);
    });
}

/// The same once the request's cancel ran (a library that cannot stop its work has a cancel
/// that does nothing), answered from `run_once`: the value went into the request's own table,
/// which the completer's drop took with it, panic and all — out of `run_once`, closing the pump
/// with `Panicked`. Found by the same probe.
#[test]
fn a_value_answering_a_request_whose_cancel_ran_does_not_end_the_pump() {
    futures_lite::future::block_on(async {
        let (finish, dropped) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (finishing, bombs) = (finish.clone(), dropped.clone());
        let (pump, handle) = Pump::builder()
            .build_with_state(
                |_| Ok(Vec::<ffi_pump::Completer<Bomb>>::new()),
                move |running, _| {
                    if finishing.load(SeqCst) {
                        for done in running.drain(..) {
                            done.complete(Bomb(bombs.clone()));
                        }
                    }
                    None
                },
            )
            .expect("pump thread starts");
        let request = handle.request(|running, done| running.push(done), |_, ()| {});
        let outcome = request.timeout(Duration::from_millis(20)).await;
        assert!(matches!(outcome, Err(Error::TimedOut)), "not answered yet");
        // Queued after the cancel: once it is answered, the cancel ran.
        assert_eq!(
            within("a call", handle.call(|running| running.len())).await,
            Ok(1)
        );
        finish.store(true, SeqCst);
        assert_eq!(
            within("a turn", pump.turn()).await,
            Ok(()),
            "{:?}",
            pump.stats()
        );
        assert!(dropped.load(SeqCst), "the value was dropped");
        assert_eq!(within("a call after", handle.call(|_| 1)).await, Ok(1));
    });
}

/// A call answered with a value whose drop panics, the `Call` dropped without being polled
/// (a task cancelled, say): the value is dropped with its panic caught, not let out of the
/// drop — on smol that aborted the process (a task's drop must not panic). Found by the same
/// probe; a `Request` in the same place caught it already.
#[test]
fn an_answered_call_dropped_unpolled_drops_its_value_with_its_panic_caught() {
    futures_lite::future::block_on(async {
        let (pump, handle) = idle_loop();
        let dropped = Arc::new(AtomicBool::new(false));
        let bomb = Bomb(dropped.clone());
        let call = handle.call(move |_| bomb);
        // Calls run in order: once this one is answered, the first was too.
        assert_eq!(within("a call", handle.call(|_| ())).await, Ok(()));
        assert!(
            !drop_lets_a_panic_out(call),
            "the panic came out of the call's drop"
        );
        assert!(dropped.load(SeqCst), "the value was dropped");
        drop(pump);
    });
}

/// A pump-evaluated wait whose check ended it with a value whose drop panics, dropped without
/// being polled again (its task cancelled): the value is dropped with its panic caught, not let
/// out of the wait's drop (on smol a task's drop must not panic). Found by review of the fix
/// above.
#[test]
fn a_value_a_check_found_for_a_wait_dropped_unpolled_is_dropped_with_its_panic_caught() {
    common::Rt::Thread.block_on(async {
        let pump = common::Rt::Thread.pump_with(Pump::builder(), || {});
        let (found, dropped) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (finding, bombs) = (found.clone(), dropped.clone());
        let mut wait =
            Box::pin(pump.wait_for(move || finding.load(SeqCst).then(|| Bomb(bombs.clone()))));
        assert!(futures_lite::future::poll_once(wait.as_mut())
            .await
            .is_none());
        found.store(true, SeqCst);
        // The next round's checks are done once it returns: the value waits in the wait.
        within("a turn", pump.turn()).await.expect("a turn");
        assert!(!dropped.load(SeqCst), "found, not dropped yet");
        assert!(
            !drop_lets_a_panic_out(wait),
            "the panic came out of the wait's drop"
        );
        assert!(dropped.load(SeqCst), "the value was dropped");
    });
}

/// A request whose `start` panicked with a payload whose drop panics, dropped without being
/// polled again: the payload is dropped with its panic caught, as an answer's value is. Found
/// by review of the fixes above (the payload had lost the catch a value has).
#[test]
fn a_start_panic_nobody_takes_is_dropped_with_its_own_panic_caught() {
    futures_lite::future::block_on(async {
        let (pump, handle) = idle_loop();
        let dropped = Arc::new(AtomicBool::new(false));
        let bomb = Bomb(dropped.clone());
        let request = handle.request(
            move |_, _: ffi_pump::Completer<()>| std::panic::panic_any(bomb),
            |_, ()| {},
        );
        // Calls run in order: once this one is answered, the start ran.
        assert_eq!(within("a call", handle.call(|_| ())).await, Ok(()));
        let dropping =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(request)));
        assert!(
            dropping.is_ok(),
            "the payload's panic came out of the request's drop"
        );
        assert!(dropped.load(SeqCst), "the payload was dropped");
        assert_eq!(within("a call after", handle.call(|_| 1)).await, Ok(1));
        drop(pump);
    });
}

/// `Stats::rounds` counts the calls of `run_once`: a call or a post on the loop's thread that
/// closes the pump before the run it was queued for leaves that run unmade, and uncounted.
/// Found by a probe of the docs (`rounds` was one more than the runs).
#[test]
fn a_run_a_call_closed_the_pump_before_is_not_counted() {
    for by_post in [false, true] {
        let runs = Arc::new(AtomicUsize::new(0));
        let counting = runs.clone();
        let (pump, handle) = Pump::builder()
            .build_with_state(
                |_| Ok(()),
                move |_, _| {
                    counting.fetch_add(1, SeqCst);
                    None
                },
            )
            .expect("pump thread starts");
        futures_lite::future::block_on(async {
            for _ in 0..3 {
                within("a turn", pump.turn()).await.expect("a turn");
            }
            let closer = pump.clone();
            if by_post {
                handle
                    .post(move |_| {
                        let _ = closer.close();
                    })
                    .expect("open");
            } else {
                let _ = within("a call", handle.call(move |_| closer.close())).await;
            }
            within("closed", pump.closed()).await.expect("closed");
        });
        let stats = pump.stats();
        assert_eq!(runs.load(SeqCst), 3, "by post: {by_post}");
        assert_eq!(stats.rounds, 3, "by post: {by_post}: {stats:?}");
    }
}

/// A pump that keeps its loop's deadlines has no ticks, so none is skipped: a deadline that
/// came during a turn's run joins it without counting as a skipped tick. Found by a probe of
/// the docs (158 "skipped ticks" in 230 rounds).
#[test]
fn a_pump_that_keeps_deadlines_counts_no_skipped_ticks() {
    let pump = Pump::builder()
        .build(|| {
            std::thread::sleep(Duration::from_millis(2));
            Some(std::time::Instant::now() + Duration::from_millis(1))
        })
        .expect("valid settings");
    pump.spawn_on(ffi_pump::Backend::Thread).expect("a thread");
    futures_lite::future::block_on(async {
        let wait = pump.wait_until(|| false).timeout(Duration::from_secs(30));
        let mut wait = Box::pin(wait);
        assert!(futures_lite::future::poll_once(wait.as_mut())
            .await
            .is_none());
        let mut turns = 0;
        while pump.stats().rounds < 100 {
            within("a turn", pump.turn()).await.expect("a turn");
            turns += 1;
        }
        assert!(turns > 10, "the turns ran the loop too");
    });
    let stats = pump.stats();
    assert_eq!(stats.skipped_ticks, 0, "{stats:?}");
    pump.close();
}

/// `Closed` panics if polled again after it completed — also after completing with
/// `Reentrant` (polled inside its pump). Found by a probe of the docs (it went on, and later
/// answered `Ok`).
#[test]
fn closed_polled_again_after_it_ended_inside_its_pump_panics() {
    use std::future::Future;
    let (pump, handle) = idle_loop();
    let closed = Arc::new(Mutex::new(Box::pin(pump.closed())));
    let polling = closed.clone();
    let first = futures_lite::future::block_on(within(
        "a call",
        handle.call(move |_| {
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            polling.lock().unwrap().as_mut().poll(&mut cx)
        }),
    ));
    assert_eq!(first, Ok(std::task::Poll::Ready(Err(Error::Reentrant))));
    pump.close();
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let _ = closed.lock().unwrap().as_mut().poll(&mut cx);
    }));
    assert!(again.is_err(), "polled again after it completed: no panic");
}

/// A `submit` on a closed pump ends with the close and leaves a value the table holds where it
/// is, as a `wait_key` there does; its `start` is dropped unrun. Found by a probe of the docs:
/// it took the value and answered `Ok`.
#[test]
fn a_submit_on_a_closed_pump_ends_with_the_close_and_leaves_the_table_as_it_is() {
    futures_lite::future::block_on(async {
        let (pump, handle) = idle_loop();
        let table = Completions::new();
        table.complete(1, 9);
        pump.close();
        within("closed", pump.closed()).await.expect("closed");
        let started = Arc::new(AtomicBool::new(false));
        let starting = started.clone();
        let answer = handle
            .submit(&table, 1, move |_| starting.store(true, SeqCst), |_| {})
            .timeout(HANG)
            .await;
        assert_eq!(answer, Err(Error::Closed));
        assert!(!started.load(SeqCst), "start ran on a closed pump");
        assert_eq!(table.take(&1), Some(9), "the value was taken");
    });
}

/// A `submit` whose `start` panicked with a payload whose drop panics, its wait dropped
/// unpolled: whichever holder lets go of the kept panic last — the wait, or its cancel on the
/// loop's thread — drops it with its panic caught. Found by a probe of the fixes above: the
/// wait's drop let it out about once in 40 (a process abort when the caller was unwinding
/// already).
#[test]
fn a_submit_start_panic_nobody_resumes_is_dropped_with_its_own_panic_caught() {
    futures_lite::future::block_on(async {
        let (pump, handle) = idle_loop();
        let table = Completions::<u32, ()>::new();
        let (mut escaped, dropped) = (0, Arc::new(AtomicUsize::new(0)));
        for key in 0..400 {
            let bomb = Counted(dropped.clone());
            let wait = handle.submit(&table, key, move |_| std::panic::panic_any(bomb), |_| {});
            // Calls run in order: once this one is answered, the start ran.
            assert_eq!(within("a call", handle.call(|_| ())).await, Ok(()));
            escaped += usize::from(drop_lets_a_panic_out(wait));
        }
        assert_eq!(escaped, 0, "payload panics let out of a wait's drop");
        assert_eq!(within("a call after", handle.call(|_| 1)).await, Ok(1));
        eventually("every payload dropped", || dropped.load(SeqCst) == 400).await;
        drop(pump);
    });
}

/// Counts itself, then panics, when dropped.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("a Drop that panics (expected by this test)");
    }
}
