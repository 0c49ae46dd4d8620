//! Futures that would wait for their own pump are refused on its loop's thread wherever they
//! were made or first polled: found by a hostile probe, which had a stream polled on the loop's
//! thread, and calls, waits and turns made (or first polled) elsewhere and then awaited there,
//! each hang that thread until the close.

mod common;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;

use ffi_pump::{Call, Completions, Emitter, Error, LoopHandle, Pump, Subscription};
use futures_lite::future::{block_on, poll_once};
use futures_lite::StreamExt;

/// A loop on its own thread whose runs do nothing.
fn idle_loop() -> (Pump, LoopHandle<()>) {
    Pump::builder()
        .build_with_state(|_| Ok(()), |_, _| None)
        .expect("pump thread starts")
}

/// What `future` ends with when awaited on the loop's thread (in a post); a hang of that thread
/// fails the test instead of blocking it.
fn awaited_on_the_loops_thread<F>(handle: &LoopHandle<()>, future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (back, outcome) = mpsc::channel();
    handle
        .post(move |_| {
            let _ = back.send(block_on(future));
        })
        .expect("pump open");
    outcome
        .recv_timeout(common::HANG)
        .expect("the loop's thread hung awaiting its own pump")
}

/// Holds the loop's thread in a post (no run can come meanwhile), makes the future with `make`
/// and polls it once here, then has the post await it there: what it ends with.
fn first_polled_elsewhere<F>(handle: &LoopHandle<()>, make: impl FnOnce() -> F) -> F::Output
where
    F: Future + Unpin + Send + 'static,
    F::Output: Send + 'static,
{
    let (held, holding) = mpsc::channel();
    let (send, made) = mpsc::channel::<F>();
    let (back, outcome) = mpsc::channel();
    handle
        .post(move |_| {
            let _ = held.send(());
            if let Ok(future) = made.recv() {
                let _ = back.send(block_on(future));
            }
        })
        .expect("pump open");
    holding.recv_timeout(common::HANG).expect("the post runs");
    let mut future = make();
    assert!(block_on(poll_once(&mut future)).is_none(), "pending");
    send.send(future).expect("post alive");
    outcome
        .recv_timeout(common::HANG)
        .expect("the loop's thread hung awaiting its own pump")
}

/// Found in review too: had it gone on, an adapter that skips errors
/// (`filter_map(Result::ok)`) would have polled it on that thread for ever, at a full core.
#[test]
fn a_stream_polled_on_the_loops_thread_with_nothing_to_hand_is_refused_and_ends() {
    let (_pump, handle) = idle_loop();
    let (mut values, emitter) = subscribed(&handle);
    emitter.emit(1).expect("room");
    let (seen, mut values) = awaited_on_the_loops_thread(&handle, async move {
        let first = values.next().await;
        let second = values.next().await;
        ((first, second), values)
    });
    assert_eq!(seen, (Some(Ok(1)), Some(Err(Error::Reentrant))));
    assert_eq!(emitter.emit(2), Err(2), "ended: nobody takes it");
    assert_eq!(block_on(values.next()), None);
    let skipping = awaited_on_the_loops_thread(&handle, {
        let (tx, rx) = mpsc::channel();
        let values = handle.subscribe(4, move |_, e: Emitter<u32>| drop(tx.send(e)), |_, _| {});
        async move {
            let _emitter = rx.recv();
            values.filter_map(Result::ok).next().await
        }
    });
    assert_eq!(skipping, None, "an error-skipping adapter ends too");
}

/// A subscription and, once its start ran, the library's end of it.
fn subscribed(handle: &LoopHandle<()>) -> (Subscription<u32>, Emitter<u32>) {
    let (tx, rx) = mpsc::channel();
    let values = handle.subscribe(4, move |_, emitter| drop(tx.send(emitter)), |_, _| {});
    let emitter = rx.recv_timeout(common::HANG).expect("start ran");
    (values, emitter)
}

#[test]
fn a_call_made_elsewhere_and_awaited_on_the_loops_thread_is_refused_unrun() {
    let (_pump, handle) = idle_loop();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let (send_call, made) = mpsc::channel::<Call<()>>();
    let (back, outcome) = mpsc::channel();
    // Queued first: the call made below waits behind it while it awaits that call.
    handle
        .post(move |_| {
            let call = made.recv().expect("test alive");
            let _ = back.send(block_on(call));
        })
        .expect("pump open");
    let call = handle.call(move |_| flag.store(true, SeqCst));
    send_call.send(call).expect("post alive");
    let outcome = outcome
        .recv_timeout(common::HANG)
        .expect("the loop's thread hung awaiting its own call");
    assert_eq!(outcome, Err(Error::Reentrant));
    assert_eq!(block_on(handle.call(|_| ())), Ok(()), "the loop goes on");
    assert!(
        !ran.load(SeqCst),
        "a refused call's closure is dropped unrun"
    );
}

#[test]
fn a_call_made_on_the_loops_thread_is_answered_where_it_is_awaited() {
    let (_pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(40_u32), |_, _| None)
        .expect("pump thread starts");
    let inner = handle.clone();
    let call = block_on(handle.call(move |_| inner.call(|n| *n + 2))).expect("a call");
    assert_eq!(block_on(call), Ok(42));
}

#[test]
fn waits_and_turns_first_polled_elsewhere_are_refused_on_the_loops_thread() {
    let (pump, handle) = idle_loop();
    let table = Completions::<u32, u32>::new();
    let keyed = first_polled_elsewhere(&handle, || handle.submit(&table, 1, |_| {}, |_| {}));
    assert_eq!(keyed, Err(Error::Reentrant));
    let turn = first_polled_elsewhere(&handle, || pump.turn());
    assert_eq!(turn, Err(Error::Reentrant));
    for strategy in common::STRATEGIES {
        let (pump, handle) = Pump::builder()
            .strategy(strategy)
            .build_with_state(|_| Ok(()), |_, _| None)
            .expect("pump thread starts");
        let never = || pump.wait_until(|| false).timeout(Duration::from_secs(60));
        let never = first_polled_elsewhere(&handle, never);
        assert_eq!(never, Err(Error::Reentrant), "{strategy:?}");
    }
    assert_eq!(block_on(handle.call(|_| ())), Ok(()), "the loop goes on");
}

#[test]
fn values_emitted_after_a_stream_ended_with_the_close_are_handed_back() {
    let (pump, handle) = idle_loop();
    let (mut values, emitter) = subscribed(&handle);
    emitter.emit(1).expect("room");
    pump.close();
    assert_eq!(block_on(values.next()), Some(Ok(1)));
    assert_eq!(block_on(values.next()), Some(Err(Error::Closed)));
    assert_eq!(emitter.emit(2), Err(2), "nobody will take it");
    assert!(!emitter.is_open());
    assert_eq!(block_on(values.next()), None);
}

/// What a wait's check captured: as it is dropped, it waits for its pump's close, and says how
/// that wait ended.
struct AwaitsTheClose {
    pump: Arc<OnceLock<Pump>>,
    ended: mpsc::Sender<Result<(), Error>>,
}

impl Drop for AwaitsTheClose {
    fn drop(&mut self) {
        if let Some(pump) = self.pump.get() {
            let _ = self.ended.send(block_on(pump.closed()));
        }
    }
}

/// A wait whose check holds an [`AwaitsTheClose`], polled once, so its check is in the
/// pump's registry; and where the capture's drop says how its wait for the close ended.
fn a_wait_whose_capture_awaits_the_close(
    pump: &Pump,
) -> (
    impl Future<Output = Result<(), Error>>,
    mpsc::Receiver<Result<(), Error>>,
) {
    let (ended, said) = mpsc::channel();
    let me = Arc::new(OnceLock::new());
    let _ = me.set(pump.clone());
    let capture = AwaitsTheClose { pump: me, ended };
    let mut wait = Box::pin(pump.wait_until(move || {
        let _ = &capture;
        false
    }));
    assert!(block_on(poll_once(&mut wait)).is_none(), "pending");
    (wait, said)
}

/// Found by a hostile probe (10 of 10): `close()` dropped the check's capture on its own thread,
/// and the capture's `Drop` waited for `closed()`, which waits for that very drop: the close
/// never returned. It is refused now, as in the loop's own `Drop`.
#[test]
fn a_check_capture_awaiting_the_close_as_the_close_drops_it_is_refused() {
    let pump = Pump::new(|| {});
    pump.spawn();
    let (wait, said) = a_wait_whose_capture_awaits_the_close(&pump);
    let closing = pump.clone();
    let closer = std::thread::spawn(move || closing.close());
    let ended = said.recv_timeout(common::HANG).expect("the close hung");
    assert_eq!(ended, Err(Error::Reentrant));
    closer.join().expect("close returned");
    block_on(common::within("closed()", pump.closed())).expect("closed");
    assert_eq!(block_on(wait), Err(Error::Closed));
}

/// The same capture dropped on the driver's thread, by a close that `run_once` made (8 of 10
/// hung the driver, and `closed()` with it).
#[test]
fn a_check_capture_awaiting_the_close_that_run_once_made_is_refused() {
    let (me, close_now) = (
        Arc::new(OnceLock::<Pump>::new()),
        Arc::new(AtomicBool::new(false)),
    );
    let (closing, now) = (me.clone(), close_now.clone());
    let pump = Pump::new(move || {
        if now.load(SeqCst) {
            closing.get().expect("set").close();
        }
    });
    let _ = me.set(pump.clone());
    pump.spawn();
    let (wait, said) = a_wait_whose_capture_awaits_the_close(&pump);
    close_now.store(true, SeqCst);
    pump.kick();
    let ended = said.recv_timeout(common::HANG).expect("the driver hung");
    assert_eq!(ended, Err(Error::Reentrant));
    block_on(common::within("closed()", pump.closed())).expect("closed");
    assert_eq!(block_on(wait), Err(Error::Closed));
}
