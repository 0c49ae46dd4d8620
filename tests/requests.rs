//! Requests with keys the pump allocates (`LoopHandle::request`): no table or id of the
//! binding's own, a cancel that gets what `start` returned (kept on the loop's thread), a
//! completer that cannot be forgotten.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump::{Completer, Error, Pump, RequestId};

/// A library whose work finishes at its next run unless it is held.
#[derive(Default)]
struct Library {
    running: HashMap<RequestId, (u64, Completer<u64>)>,
    held: bool,
    cancelled: Vec<RequestId>,
}

fn library() -> (Pump, ffi_pump::LoopHandle<Library>) {
    Pump::builder()
        .build_with_state(
            |_| Ok(Library::default()),
            |library, _| {
                if !library.held {
                    for (_, (input, done)) in library.running.drain() {
                        done.complete(input * 2);
                    }
                }
                None
            },
        )
        .expect("pump thread starts")
}

fn start(input: u64) -> impl FnOnce(&mut Library, Completer<u64>) -> RequestId + Send + 'static {
    move |library, done| {
        let id = done.id();
        library.running.insert(id, (input, done));
        id
    }
}

fn cancel(library: &mut Library, id: RequestId) {
    library.running.remove(&id);
    library.cancelled.push(id);
}

on_every_backend! {
    fn requests_get_their_own_results_under_ids_the_pump_allocates(rt: Rt) {
        rt.block_on(async {
            let (_pump, handle) = library();
            let requests: Vec<_> = (0..1_000_u64)
                .map(|n| rt.spawn(handle.request(start(n), cancel).timeout(Duration::from_secs(10))))
                .collect();
            for (n, request) in requests.into_iter().enumerate() {
                assert_eq!(request.await, Ok(n as u64 * 2));
            }
            let ids: Vec<_> = (0..3).map(|_| handle.request(start(0), cancel)).collect();
            let ids: Vec<_> = ids.iter().map(|request| request.id()).collect();
            assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "fresh ids: {ids:?}");
        });
    }

    fn a_request_that_gives_up_cancels_its_own_work_once(rt: Rt) {
        rt.block_on(async {
            let (pump, handle) = library();
            handle.call(|library| library.held = true).await.expect("the call runs");
            let request = handle.request(start(1), cancel).timeout(Duration::from_millis(20));
            let id = request.id();
            assert_eq!(request.await, Err(Error::TimedOut));
            let (cancelled, running) = handle
                .call(|library| (library.cancelled.clone(), library.running.len()))
                .await
                .expect("the call runs after the cancel");
            assert_eq!(cancelled, vec![id], "cancelled once, with its id");
            assert_eq!(running, 0);
            // A completed request is not cancelled, even if dropped right after.
            handle.call(|library| library.held = false).await.expect("the call runs");
            assert_eq!(handle.request(start(3), cancel).await, Ok(6));
            let cancelled = handle.call(|library| library.cancelled.len()).await;
            assert_eq!(cancelled, Ok(1));
            assert!(!pump.is_closed());
        });
    }

    fn a_completer_dropped_unused_ends_its_request(rt: Rt) {
        rt.block_on(async {
            let (_pump, handle) = library();
            let forgotten = handle.request(
                |_, done: Completer<u64>| {
                    let id = done.id();
                    drop(done);
                    id
                },
                cancel,
            );
            assert_eq!(
                common::within("the forgotten request", forgotten).await,
                Err(Error::Unanswered)
            );
            // Dropped as a panicking run unwinds: the request hears the panic, not "unanswered".
            let (_pump, handle) = Pump::builder()
                .build_with_state(|_| Ok(Vec::<Completer<u64>>::new()), |running, _| {
                    if !running.is_empty() {
                        let _on_the_stack = std::mem::take(running);
                        panic!("run_once panics holding completers (expected by this test)");
                    }
                    None
                })
                .expect("pump thread starts");
            let request = handle.request(|running, done| running.push(done), |_, _| {});
            assert_eq!(common::within("the request", request).await, Err(Error::Panicked));
        });
    }

    fn a_close_ends_requests_and_runs_their_cancels_with_the_state(rt: Rt) {
        rt.block_on(async {
            let cancels = Arc::new(AtomicUsize::new(0));
            let (pump, handle) = library();
            handle.call(|library| library.held = true).await.expect("the call runs");
            let requests: Vec<_> = (0..10)
                .map(|n| {
                    let cancels = cancels.clone();
                    rt.spawn(handle.request(start(n), move |library, id| {
                        cancel(library, id);
                        cancels.fetch_add(1, SeqCst);
                    }))
                })
                .collect();
            common::pending(&pump, 10).await;
            handle.call(|_| ()).await.expect("every start ran");
            pump.close();
            for request in requests {
                assert_eq!(common::within("a request", request).await, Err(Error::Closed));
            }
            common::within("closed()", pump.closed()).await.expect("closed from outside");
            assert_eq!(cancels.load(SeqCst), 10);
            // On a closed pump a request ends at once, its start unrun.
            let late = handle.request(|_, _: Completer<u64>| panic!("start runs on a closed pump"), cancel);
            assert_eq!(common::within("a request on a closed pump", late).await, Err(Error::Closed));
        });
    }
}

/// What `start` returns stays on the loop's thread (it holds an `Rc`: not `Send`), goes to the
/// cancel if the request gives up, and is dropped once the request is answered (as `start`
/// returns when answered inside it, at a later run when answered from another thread); at the
/// close, the cancel gets it.
#[test]
fn what_start_returns_goes_to_the_cancel_or_is_dropped_once_answered() {
    use common::Token;
    use std::sync::Mutex;

    let (token, live) = common::tokens();
    let cancelled = Arc::new(Mutex::new(Vec::new()));
    let cancel = {
        let cancelled = cancelled.clone();
        move || {
            let cancelled = cancelled.clone();
            move |_: &mut Vec<Completer<u64>>, token: Token| cancelled.lock().unwrap().push(token.0)
        }
    };

    futures_lite::future::block_on(async {
        let (pump, handle) = Pump::builder()
            .build_with_state(|_| Ok(Vec::<Completer<u64>>::new()), |_, _| None)
            .expect("pump thread starts");
        // Runs the loop until nothing `start` returned is alive any more.
        let dropped_by_a_run = |what: &'static str| {
            let (runs, live_now) = (handle.clone(), live.clone());
            common::eventually(what, move || {
                futures_lite::future::block_on(runs.call(|_| {})).expect("a run");
                live_now.load(SeqCst) == 0
            })
        };

        // Answered on the loop's thread, inside `start` itself (a library that refuses the
        // work at once): dropped as `start` returns, with no run to come (found by a probe: it
        // waited for one, for ever on a loop with nothing due).
        let make = token.clone();
        let answered = handle.request(
            move |_, done: Completer<u64>| {
                done.complete(1);
                make(1)
            },
            cancel(),
        );
        assert_eq!(common::within("answered", answered).await, Ok(1));
        let live_now = live.clone();
        common::eventually("dropped as start returned, no run made", move || {
            live_now.load(SeqCst) == 0
        })
        .await;
        // Dropped unanswered inside `start`: the same.
        let make = token.clone();
        let unanswered = handle.request(move |_, _: Completer<u64>| make(5), cancel());
        let outcome = common::within("unanswered", unanswered).await;
        assert_eq!(outcome, Err(Error::Unanswered));
        let live_now = live.clone();
        common::eventually("dropped as start returned, unanswered", move || {
            live_now.load(SeqCst) == 0
        })
        .await;

        // Gave up: the cancel gets the very value.
        let make = token.clone();
        let gave_up = handle
            .request(
                move |held, done: Completer<u64>| {
                    held.push(done);
                    make(2)
                },
                cancel(),
            )
            .timeout(Duration::from_millis(20));
        assert_eq!(gave_up.await, Err(Error::TimedOut));
        handle
            .call(|_| {})
            .await
            .expect("the call runs after the cancel");
        assert_eq!(*cancelled.lock().unwrap(), [2]);
        assert_eq!(live.load(SeqCst), 0);

        // Answered from another thread: dropped on the loop's thread at its next run.
        let make = token.clone();
        let elsewhere = handle.request(
            move |_, done: Completer<u64>| {
                std::thread::spawn(move || done.complete(3));
                make(3)
            },
            cancel(),
        );
        assert_eq!(common::within("answered elsewhere", elsewhere).await, Ok(3));
        // The word comes as the other thread drops the completer, just after the answer.
        dropped_by_a_run("dropped after the answer from another thread").await;

        // Open at the close: the cancel gets it, on the loop's thread, before it ends.
        let make = token.clone();
        let open = handle.request(
            move |held, done: Completer<u64>| {
                held.push(done);
                make(4)
            },
            cancel(),
        );
        let live_now = live.clone();
        common::eventually("the open request started", move || {
            live_now.load(SeqCst) == 1
        })
        .await;
        pump.close();
        assert!(open.await.is_err());
        pump.closed().await.expect("closed from outside the pump");
        assert_eq!(*cancelled.lock().unwrap(), [2, 4]);
        assert_eq!(live.load(SeqCst), 0);
        assert_eq!(
            *cancelled.lock().unwrap(),
            [2, 4],
            "no cancel of an answered request"
        );
    });
}

/// Found by a hostile probe: a request whose `start` panicked ended with `Error::Panicked`,
/// which says the pump failed, while the pump went on. The panic now reaches the awaiting task,
/// as a call's does; its cancel does not run (nothing was started), and the pump goes on.
#[test]
fn a_panic_in_start_reaches_the_awaiting_task_and_the_pump_goes_on() {
    let cancels = Arc::new(AtomicUsize::new(0));
    let counted = cancels.clone();
    let (pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    let request = handle.request(
        |_, _done: Completer<u64>| -> () { panic!("a start that panics (expected by this test)") },
        move |_, ()| {
            counted.fetch_add(1, SeqCst);
        },
    );
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        futures_lite::future::block_on(request.timeout(common::HANG))
    }));
    let panic = outcome.expect_err("the start's panic, resumed");
    let message = panic.downcast_ref::<&str>().copied();
    assert_eq!(message, Some("a start that panics (expected by this test)"));
    futures_lite::future::block_on(async {
        let later = handle.request(|_, done: Completer<u64>| done.complete(7), |_, ()| {});
        assert_eq!(
            common::within("a request", later).await,
            Ok(7),
            "the pump goes on"
        );
    });
    assert_eq!(cancels.load(SeqCst), 0, "nothing was started to cancel");
    assert!(!pump.stats().panicked && !pump.is_closed());
}

/// Found by a hostile probe: a `submit` whose `start` panicked left its wait pending until its
/// timeout or the close. The panic now reaches the awaiting task as a request's does, whether
/// the wait was polled before the start ran or after, and also through a timeout that passes
/// meanwhile; the wait gives up, so its cancel runs for what the start began, the key is free
/// again, and the pump goes on.
#[test]
fn a_panic_in_a_submits_start_reaches_the_awaiting_task() {
    const MESSAGE: &str = "a submit's start that panics (expected by this test)";
    let cancels = Arc::new(AtomicUsize::new(0));
    let (pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    let table = ffi_pump::Completions::<u32, u32>::new();
    let submit = |timeout: Duration| {
        let counted = cancels.clone();
        let start = |_: &mut ()| panic!("{MESSAGE}");
        let cancel = move |_: &mut ()| {
            counted.fetch_add(1, SeqCst);
        };
        handle.submit(&table, 1, start, cancel).timeout(timeout)
    };
    let resumed = |wait| {
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            futures_lite::future::block_on(wait)
        }));
        let panic = outcome.expect_err("the start's panic, resumed");
        assert_eq!(
            panic.downcast_ref::<String>().map(String::as_str),
            Some(MESSAGE)
        );
        assert!(
            started.elapsed() < common::HANG / 2,
            "resumed when it happened"
        );
    };
    let ran_all = || futures_lite::future::block_on(handle.call(|_| ())).expect("a call");
    // Polled at once, likely before the start ran on the loop's thread.
    resumed(submit(common::HANG));
    // Polled only after the start ran (each after the last one's key went back: its cancel
    // hook, which does nothing here, ran on the loop's thread).
    ran_all();
    let wait = submit(common::HANG);
    ran_all();
    resumed(wait);
    // Its timeout passed before it was polled: the panic, not `TimedOut`.
    ran_all();
    let wait = submit(Duration::ZERO);
    ran_all();
    resumed(wait);
    ran_all();
    assert_eq!(
        cancels.load(SeqCst),
        3,
        "each gave up: cancel ran for what start began"
    );
    let again = handle.submit(&table, 1, |_| {}, |_| {});
    table.complete(1, 7);
    let answer = futures_lite::future::block_on(again.timeout(common::HANG));
    assert_eq!(answer, Ok(7), "the key is free again");
    assert!(!pump.stats().panicked && !pump.is_closed());
}

/// Found in review: requests and submits made on the loop's thread (in a call, or a C callback
/// in `run_once`) and awaited elsewhere ended with `Reentrant` once `submit` took its key at
/// once, their start unrun. Whether a wait may wait is asked where it is polled.
#[test]
fn requests_made_on_the_loops_thread_are_answered_where_they_are_awaited() {
    let (_pump, handle) = library();
    let inner = handle.clone();
    let made_there = handle.call(move |_| inner.request(start(5), cancel));
    let request = futures_lite::future::block_on(made_there).expect("a call");
    let answer = futures_lite::future::block_on(request.timeout(common::HANG));
    assert_eq!(answer, Ok(10));

    let table = ffi_pump::Completions::<u32, u32>::new();
    let (inner, keyed, done) = (handle.clone(), table.clone(), table.clone());
    let made_there = handle.call(move |_| {
        inner.submit(
            &keyed,
            1,
            move |_| {
                let _ = done.complete(1, 7);
            },
            |_| {},
        )
    });
    let wait = futures_lite::future::block_on(made_there).expect("a call");
    assert_eq!(
        futures_lite::future::block_on(wait.timeout(common::HANG)),
        Ok(7)
    );
}

/// Found in review: a request made elsewhere and awaited on the loop's thread (a call that
/// blocks on it) hung that thread for ever, which alone could answer it; it is refused with
/// `Reentrant`, as before `submit` took its key at once. Held, so that no run answers it
/// before the call polls it (one already answered is its value there: the test below).
#[test]
fn a_request_awaited_on_the_loops_thread_is_refused() {
    let (_pump, handle) = library();
    let held = handle.call(|library| library.held = true);
    futures_lite::future::block_on(common::within("a call", held)).expect("open");
    let request = handle.request(start(5), cancel);
    let blocked_there = handle.call(move |_| futures_lite::future::block_on(request));
    let outcome = futures_lite::future::block_on(common::within("a call", blocked_there));
    assert_eq!(outcome, Ok(Err(Error::Reentrant)));
}

/// Found in review: a `start` that drops its completer inside a panic it catches itself left
/// the request unanswered for ever; it ends with `Unanswered`.
#[test]
fn a_completer_lost_in_a_panic_its_start_caught_ends_the_request() {
    let (_pump, handle) = library();
    let request = handle.request(
        |_, done: Completer<u64>| {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _done = done;
                panic!("a panic caught inside start (expected by this test)");
            }));
        },
        |_, ()| {},
    );
    let answer = futures_lite::future::block_on(request.timeout(common::HANG));
    assert_eq!(answer, Err(Error::Unanswered));
}

/// Found by a hostile probe: a completer dropped while any panic unwound — a call's, which the
/// pump catches, or a library thread's — ended its request with `Panicked`, which says the pump
/// failed, while the pump went on. Only its own pump's `run_once` unwinding means that.
#[test]
fn a_completer_dropped_in_a_panic_not_its_loops_ends_the_request_unanswered() {
    futures_lite::future::block_on(async {
        let (pump, handle) = Pump::builder()
            .build_with_state(|_| Ok(Vec::<Completer<u64>>::new()), |_, _| None)
            .expect("pump thread starts");
        let in_a_post = handle.request(|kept, done| kept.push(done), |_, ()| {});
        common::within("a call", handle.call(|_| {}))
            .await
            .expect("open");
        handle
            .post(|kept| {
                let _lost = kept.pop().expect("kept by its start");
                panic!("a post panics holding a completer (expected by this test)");
            })
            .expect("open");
        let answer = common::within("the request", in_a_post).await;
        assert_eq!(answer, Err(Error::Unanswered), "dropped as a post unwound");

        let on_a_thread = handle.request(
            |_, done: Completer<u64>| {
                std::thread::spawn(move || {
                    let _done = done;
                    panic!("a library's thread panics holding a completer (expected by this test)");
                });
            },
            |_, ()| {},
        );
        let answer = common::within("the request", on_a_thread).await;
        assert_eq!(
            answer,
            Err(Error::Unanswered),
            "dropped as a thread unwound"
        );
        assert!(
            !pump.is_closed() && !pump.stats().panicked,
            "the pump went on"
        );
    });
}

/// Found by a hostile probe: a request that gave up while the loop's thread was busy, and that
/// the library answered before its cancel's turn came, got no cancel when answered on the
/// loop's thread, but did when answered from another thread: `cancel` ran on a C object the
/// library had reported finished. Neither runs it now.
#[test]
fn a_request_answered_after_it_gave_up_and_before_its_cancel_ran_is_not_cancelled() {
    for on_the_loops_thread in [true, false] {
        let cancels = Arc::new(AtomicUsize::new(0));
        let (_pump, handle) = Pump::builder()
            .build_with_state(|_| Ok(Vec::<Completer<u8>>::new()), |_, _| None)
            .expect("pump thread starts");
        let counted = cancels.clone();
        let request = handle.request(
            |kept: &mut Vec<Completer<u8>>, done| kept.push(done),
            move |_, ()| {
                counted.fetch_add(1, SeqCst);
            },
        );
        futures_lite::future::block_on(async {
            common::within("start", handle.call(|_| {}))
                .await
                .expect("open");
            let elsewhere = match on_the_loops_thread {
                true => None,
                false => Some(
                    common::within("the completer", handle.call(|kept| kept.pop()))
                        .await
                        .expect("open")
                        .expect("kept by start"),
                ),
            };
            // The loop's thread is held in a post while the request gives up.
            let (release, held) = std::sync::mpsc::channel::<()>();
            let (entered, inside) = std::sync::mpsc::channel::<()>();
            handle
                .post(move |kept| {
                    entered.send(()).expect("the test waits");
                    held.recv().expect("the test releases");
                    if let Some(done) = kept.pop() {
                        done.complete(1);
                    }
                })
                .expect("open");
            inside.recv().expect("the post runs");
            let gave_up = request.timeout(Duration::from_millis(1)).await;
            assert_eq!(gave_up, Err(Error::TimedOut));
            if let Some(done) = elsewhere {
                std::thread::spawn(move || done.complete(1))
                    .join()
                    .expect("answered");
            }
            release.send(()).expect("the post waits");
            for _ in 0..2 {
                common::within("a call", handle.call(|_| {}))
                    .await
                    .expect("open");
            }
        });
        assert_eq!(
            cancels.load(SeqCst),
            0,
            "answered on the loop's thread: {on_the_loops_thread}"
        );
    }
}

/// Found by a randomized stress probe: a `start` that kept its completer (as a binding keeps it
/// with the C object it started) and then panicked had its panic replaced by whatever the
/// library did with the completer next — `Ok` when it answered it, `Unanswered` when it dropped
/// it — so the panic never reached the awaiting task. The first answer stands.
#[test]
fn a_panic_in_start_is_not_replaced_by_a_later_answer_of_its_completer() {
    use futures_lite::FutureExt;
    for answer in [false, true] {
        let outcome = futures_lite::future::block_on(async {
            let (pump, library) = Pump::builder()
                .build_with_state(
                    |_| Ok(Vec::<Completer<u64>>::new()),
                    move |kept, _| {
                        for done in kept.drain(..) {
                            match answer {
                                true => done.complete(7),
                                false => drop(done),
                            }
                        }
                        None
                    },
                )
                .expect("pump thread starts");
            let request = library.request(
                |kept: &mut Vec<Completer<u64>>, done| {
                    kept.push(done);
                    panic!("start panics after keeping its completer (expected by this test)");
                },
                |_, ()| {},
            );
            // Start runs (and panics), then a run answers or drops the kept completer.
            common::within("a call", library.call(|_| {}))
                .await
                .expect("open");
            pump.turn().await.expect("a run");
            std::panic::AssertUnwindSafe(request.timeout(common::HANG))
                .catch_unwind()
                .await
        });
        assert!(
            outcome.is_err(),
            "answered: {answer}: start's panic was lost, the request ended with {outcome:?}"
        );
    }
}

/// Found by a hostile probe: a `start` that completed its request, then panicked, lost the
/// panic when the awaiting task took the value in between (5 runs in 15; always when `start`
/// waited after completing): the value completed inside `start` is held back until `start`
/// returned, and the panic goes first. The same for a `submit` whose `start` completes its key.
#[test]
fn a_start_that_completes_then_panics_ends_its_request_with_the_panic() {
    let (_pump, handle) = library();
    let request = handle.request(
        |_, done: Completer<u64>| {
            done.complete(1);
            // The awaiting task hears the completion and looks meanwhile.
            std::thread::sleep(Duration::from_millis(50));
            panic!("start panics after completing (expected by this test)");
        },
        |_, ()| {},
    );
    let awaited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        futures_lite::future::block_on(common::within("the request", request))
    }));
    assert!(awaited.is_err(), "the panic was lost: {:?}", awaited.ok());

    let table = ffi_pump::Completions::<u8, u64>::new();
    let completes = table.clone();
    let submitted = handle.submit(
        &table,
        1,
        move |_| {
            completes.complete(1, 1);
            std::thread::sleep(Duration::from_millis(50));
            panic!("a submit's start panics after completing (expected by this test)");
        },
        |_| {},
    );
    let awaited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        futures_lite::future::block_on(common::within("the submit", submitted))
    }));
    assert!(awaited.is_err(), "the panic was lost: {:?}", awaited.ok());
    // A value completed inside a `start` that returns is its request's as before.
    let answered = handle.request(|_, done: Completer<u64>| done.complete(7), |_, ()| {});
    let answer = futures_lite::future::block_on(common::within("the request", answered));
    assert_eq!(answer, Ok(7));
}

/// Found by a hostile probe: a completer dropped in a panic its pump's `run_once` caught itself
/// (a C callback the binding guards) ended its request with `Panicked`, which says the pump
/// failed, while the pump went on: the answer waits for the run to end.
#[test]
fn a_completer_dropped_in_a_panic_run_once_caught_ends_the_request_unanswered() {
    let (pump, handle) = Pump::builder()
        .build_with_state(
            |_| Ok(Vec::<Completer<u64>>::new()),
            |kept: &mut Vec<Completer<u64>>, _| {
                if let Some(done) = kept.pop() {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                        let _done = done;
                        panic!("a C callback panics, caught by run_once (expected by this test)");
                    }));
                }
                None
            },
        )
        .expect("pump thread starts");
    let request = handle.request(|kept, done| kept.push(done), |_, ()| {});
    let answer = futures_lite::future::block_on(common::within("the request", request));
    assert_eq!(answer, Err(Error::Unanswered));
    assert!(
        !pump.is_closed() && !pump.stats().panicked,
        "the pump went on"
    );
}

/// Found by a hostile probe: a request already answered, first polled on its loop's thread,
/// was refused with `Reentrant` and its value dropped, though it would not have waited.
#[test]
fn an_answered_request_first_polled_on_the_loops_thread_gets_its_value() {
    let (_pump, handle) = library();
    let request = handle.request(|_, done: Completer<u64>| done.complete(42), |_, ()| {});
    let request = std::sync::Mutex::new(Some(request));
    let polled_there = handle.call(move |_| {
        let request = request.lock().expect("one caller").take().expect("once");
        futures_lite::future::block_on(request)
    });
    let outcome = futures_lite::future::block_on(common::within("a call", polled_there));
    assert_eq!(outcome, Ok(Ok(42)));
}

/// Awaits `wait` (a 50 ms timeout; its `start` blocks until `go`): it ends `TimedOut` well
/// before `start` is let go.
fn ends_at_once_timed_out<T: std::fmt::Debug + PartialEq>(
    wait: impl std::future::Future<Output = Result<T, Error>>,
    go: std::sync::mpsc::Sender<()>,
) {
    let began = Instant::now();
    let outcome = futures_lite::future::block_on(wait);
    let took = began.elapsed();
    go.send(()).expect("start waits");
    assert_eq!(outcome, Err(Error::TimedOut));
    assert!(
        took < Duration::from_secs(2),
        "a 50 ms timeout took {took:?}"
    );
}

/// Found by a hostile probe, then by a review of the first fix: a request (or a submit) whose
/// deadline passed while its `start` still ran, having completed it, ended `Ok` with that value,
/// against "a value completed inside `start` is the request's only once `start` returned"
/// (10 runs in 10); the first fix had the deadline wait for `start`, so a `start` that blocked
/// stretched a 50 ms timeout to as long as it ran (3 s). A deadline that passes while `start`
/// runs ends the request with `TimedOut` at once, without what `start` completed, and its
/// cancel, run after `start`, finds the work finished and cancels nothing.
#[test]
fn a_deadline_that_passes_while_start_runs_ends_the_request_at_once_without_its_value() {
    use std::sync::mpsc::channel;
    let (pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(Vec::new()), |_: &mut Vec<Completer<u64>>, _| None)
        .expect("pump thread starts");
    let cancelled = Arc::new(AtomicUsize::new(0));
    // Completed inside `start`, which then blocks until the test lets it go.
    let (go, go_rx) = channel::<()>();
    let counts = cancelled.clone();
    let request = handle
        .request(
            move |_, done: Completer<u64>| {
                done.complete(1);
                let _ = go_rx.recv_timeout(Duration::from_secs(10));
            },
            move |_, ()| {
                counts.fetch_add(1, SeqCst);
            },
        )
        .timeout(Duration::from_millis(50));
    ends_at_once_timed_out(request, go);
    // Nothing completed: `start` blocks after keeping its completer.
    let (go, go_rx) = channel::<()>();
    let counts = cancelled.clone();
    let request = handle
        .request(
            move |kept, done| {
                kept.push(done);
                let _ = go_rx.recv_timeout(Duration::from_secs(10));
            },
            move |kept, ()| {
                kept.clear();
                counts.fetch_add(1, SeqCst);
            },
        )
        .timeout(Duration::from_millis(50));
    ends_at_once_timed_out(request, go);
    // A submit whose `start` completes its key, then blocks: the same, and the key is free.
    let table = ffi_pump::Completions::<u8, u64>::new();
    let completes = table.clone();
    let (go, go_rx) = channel::<()>();
    let submitted = handle
        .submit(
            &table,
            1,
            move |_| {
                completes.complete(1, 1);
                let _ = go_rx.recv_timeout(Duration::from_secs(10));
            },
            |_| {},
        )
        .timeout(Duration::from_millis(50));
    ends_at_once_timed_out(submitted, go);
    // The cancels ran on the loop's thread (a call after them sees what they did): the one of
    // the request that completed nothing only.
    assert_eq!(futures_lite::future::block_on(handle.call(|_| ())), Ok(()));
    futures_lite::future::block_on(common::eventually("the cancel", || {
        cancelled.load(SeqCst) == 1
    }));
    assert_eq!(
        futures_lite::future::block_on(handle.call(|kept| kept.len())),
        Ok(0)
    );
    let again = handle.submit(&table, 1, |_| {}, |_| {});
    let again = futures_lite::future::block_on(again.timeout(Duration::from_millis(20)));
    assert_eq!(
        again,
        Err(Error::TimedOut),
        "the key is free for a new wait"
    );
    pump.close();
}

/// Found by a hostile probe (a binding of a host-vtable library, D-Bus's or Avahi's shape): a
/// request that gave up while its `start` still waited for the busy loop's thread — timed out,
/// dropped after a poll, or dropped unpolled (the branch a `select!` did not take) — still had
/// its `start` run once the thread was free, and its cancel right after: the C library sent a
/// message nobody awaited, which no cancel can take back. Now neither runs.
#[test]
fn a_request_that_gives_up_before_its_start_ran_starts_nothing() {
    use futures_lite::FutureExt;
    for how in ["timed out", "dropped after a poll", "dropped unpolled"] {
        let (starts, cancels) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (_pump, handle) = Pump::builder()
            .build_with_state(|_| Ok(Vec::<Completer<u8>>::new()), |_, _| None)
            .expect("pump thread starts");
        futures_lite::future::block_on(async {
            // The loop's thread is held in a post while the request is made and gives up.
            let release = common::hold_loop_thread(&handle);
            let (started, cancelled) = (starts.clone(), cancels.clone());
            let request = handle.request(
                move |kept: &mut Vec<Completer<u8>>, done| {
                    started.fetch_add(1, SeqCst);
                    kept.push(done);
                },
                move |_, ()| {
                    cancelled.fetch_add(1, SeqCst);
                },
            );
            match how {
                "timed out" => {
                    let gave_up = request.timeout(Duration::from_millis(1)).await;
                    assert_eq!(gave_up, Err(Error::TimedOut));
                }
                "dropped after a poll" => {
                    let mut request = Box::pin(request);
                    assert!(futures_lite::future::poll_once(&mut request)
                        .await
                        .is_none());
                }
                _ => drop(request),
            }
            release.send(()).expect("the post waits");
            let kept = common::within("a call", handle.call(|kept| kept.len()))
                .await
                .expect("open");
            assert_eq!(kept, 0, "{how}: no completer kept");
            // A request made after it still starts, and is answered.
            let answered = handle
                .request(|_, done: Completer<u8>| done.complete(7), |_, ()| {})
                .boxed();
            assert_eq!(common::within("a later request", answered).await, Ok(7));
        });
        assert_eq!(starts.load(SeqCst), 0, "{how}: start ran");
        assert_eq!(cancels.load(SeqCst), 0, "{how}: cancel ran");
    }
}

/// Found in review of the fix above: a submit whose key another thread completed while its
/// `start` still waited for the busy loop's thread got its value, and `start` then ran anyway —
/// work nobody awaited, which nothing cancelled. It never runs now, as for a value the table
/// held before the submit.
#[test]
fn a_submit_answered_before_its_start_ran_starts_nothing() {
    let (starts, cancels) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (_pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    let table = ffi_pump::Completions::<u32, u32>::new();
    futures_lite::future::block_on(async {
        let release = common::hold_loop_thread(&handle);
        let (started, cancelled) = (starts.clone(), cancels.clone());
        let wait = handle.submit(
            &table,
            1,
            move |_| {
                started.fetch_add(1, SeqCst);
            },
            move |_| {
                cancelled.fetch_add(1, SeqCst);
            },
        );
        let elsewhere = table.clone();
        std::thread::spawn(move || elsewhere.complete(1, 9))
            .join()
            .expect("completed");
        assert_eq!(common::within("the answered wait", wait).await, Ok(9));
        release.send(()).expect("the post waits");
        common::within("a call", handle.call(|_| {}))
            .await
            .expect("open");
    });
    assert_eq!(starts.load(SeqCst), 0, "start ran");
    assert_eq!(cancels.load(SeqCst), 0, "cancel ran");
}

/// Found in review: a wait that took a value completed elsewhere asked whether its `start` ran
/// before it told `start` it had its value, so a `start` that began in between ran with nobody
/// waiting for it (7 – 20 times in 20 000). The wait tells `start` first now, and one that
/// began is seen running: the value is held back until it ended.
#[test]
fn a_start_that_begins_as_its_wait_takes_a_value_completed_elsewhere_ends_first() {
    use std::sync::atomic::AtomicBool;
    let (_pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts");
    let table = ffi_pump::Completions::<u64, u32>::new();
    for key in 0..5_000_u64 {
        let go = Arc::new(AtomicBool::new(false));
        let entered = Arc::new(AtomicBool::new(false));
        {
            let (go, entered) = (go.clone(), entered.clone());
            handle
                .post(move |_| {
                    entered.store(true, SeqCst);
                    while !go.load(SeqCst) {
                        std::hint::spin_loop();
                    }
                })
                .expect("open");
        }
        while !entered.load(SeqCst) {
            std::hint::spin_loop();
        }
        let (began, ended) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let wait = {
            let (began, ended) = (began.clone(), ended.clone());
            handle.submit(
                &table,
                key,
                move |_| {
                    began.store(true, SeqCst);
                    std::thread::sleep(Duration::from_micros(100));
                    ended.store(true, SeqCst);
                },
                |_| {},
            )
        };
        // Answered elsewhere; then the loop's thread goes on to `start` as the wait takes its
        // value, at a varying lag.
        table.complete(key, 9);
        go.store(true, SeqCst);
        for _ in 0..(key % 2_000) {
            std::hint::spin_loop();
        }
        let value = futures_lite::future::block_on(wait);
        let ended_as_it_returned = ended.load(SeqCst);
        assert_eq!(value, Ok(9));
        futures_lite::future::block_on(handle.call(|_| {})).expect("open");
        assert!(
            !began.load(SeqCst) || ended_as_it_returned,
            "iteration {key}: start ran while its wait had already returned"
        );
    }
}
