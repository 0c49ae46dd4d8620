//! Streams of values for one subscription (`LoopHandle::subscribe`): in order, bounded, ended
//! by a close with its reason, and unsubscribed on the loop's thread when dropped.

mod common;

use std::thread::ThreadId;
use std::time::Instant;

use common::within;
use ffi_pump::{Emitter, Error, LoopHandle, Pump, RequestId};
use futures_lite::StreamExt;

/// A library with one subscriber at a time, emitting from `run_once` what a call queued.
#[derive(Default)]
struct Source {
    subscriber: Option<Emitter<u64>>,
    to_emit: u64,
    next: u64,
    /// Values handed back by the emitter, each counted once however many runs retried it.
    refused: u64,
    last_refused: Option<u64>,
    panic_next_run: bool,
    home: Option<ThreadId>,
    stopped_on: Option<(RequestId, ThreadId)>,
}

impl Source {
    fn run_once(&mut self) -> Option<Instant> {
        assert!(
            !self.panic_next_run,
            "run_once panics (expected by this test)"
        );
        if let Some(subscriber) = &self.subscriber {
            while self.to_emit > 0 {
                match subscriber.emit(self.next) {
                    Ok(()) => {
                        self.next += 1;
                        self.to_emit -= 1;
                    }
                    Err(_) => {
                        // One more run may come before the test looks (a kick left over from
                        // the subscribe): the same value refused again is not another one.
                        if self.last_refused != Some(self.next) {
                            self.refused += 1;
                            self.last_refused = Some(self.next);
                        }
                        break;
                    }
                }
            }
        }
        None
    }
}

fn source() -> (Pump, LoopHandle<Source>) {
    Pump::builder()
        .build_with_state(
            |_| {
                Ok(Source {
                    home: Some(std::thread::current().id()),
                    ..Source::default()
                })
            },
            |source, _| source.run_once(),
        )
        .expect("pump thread starts")
}

fn subscribe(handle: &LoopHandle<Source>, capacity: usize) -> ffi_pump::Subscription<u64> {
    handle.subscribe(
        capacity,
        |source, emitter| {
            let id = emitter.id(); // what the stop gets: the library's handle, here its id
            source.subscriber = Some(emitter);
            id
        },
        |source, id| {
            source.subscriber = None;
            source.stopped_on = Some((id, std::thread::current().id()));
        },
    )
}

on_every_backend! {
    fn ten_thousand_values_arrive_in_order_and_a_close_ends_the_stream_with_its_reason(rt: Rt) {
        rt.block_on(async {
            const N: u64 = 10_000;
            let (pump, handle) = source();
            let mut stream = subscribe(&handle, N as usize);
            handle.call(|source| source.to_emit = N).await.expect("the call runs");
            let taker = rt.spawn(async move {
                let mut seen = Vec::with_capacity(N as usize);
                while seen.len() < N as usize {
                    match stream.next().await {
                        Some(Ok(value)) => seen.push(value),
                        other => panic!("after {} values: {other:?}", seen.len()),
                    }
                }
                (seen, stream)
            });
            let (seen, mut stream) = within("10 000 values", taker).await;
            assert!(seen.iter().copied().eq(0..N), "in order, none lost or repeated");
            pump.close();
            assert_eq!(within("the end", stream.next()).await, Some(Err(Error::Closed)));
            assert_eq!(stream.next().await, None);

            // The close reason is the pump's: here a panic in run_once.
            let (_pump, handle) = source();
            let mut stream = subscribe(&handle, 4);
            handle.call(|source| source.to_emit = 1).await.expect("the call runs");
            assert_eq!(within("a value", stream.next()).await, Some(Ok(0)));
            let _ = handle.call(|source| source.panic_next_run = true).await;
            assert_eq!(within("the end", stream.next()).await, Some(Err(Error::Panicked)));
            assert_eq!(stream.next().await, None);
        });
    }

    fn a_subscription_holds_at_most_its_capacity_and_the_library_hears_the_rest(rt: Rt) {
        rt.block_on(async {
            let (_pump, handle) = source();
            let mut stream = subscribe(&handle, 3);
            handle.call(|source| source.to_emit = 5).await.expect("the call runs");
            let refused = handle.call(|source| source.refused).await;
            assert_eq!(refused, Ok(1), "the fourth value was handed back");
            for expected in 0..3 {
                assert_eq!(within("a value", stream.next()).await, Some(Ok(expected)));
            }
            // Room again: the library's next run emits the rest.
            handle.kicker().kick();
            assert_eq!(within("a value", stream.next()).await, Some(Ok(3)));
            assert_eq!(within("a value", stream.next()).await, Some(Ok(4)));
        });
    }

    fn dropping_the_stream_unsubscribes_on_the_loops_thread(rt: Rt) {
        rt.block_on(async {
            let (pump, handle) = source();
            let stream = subscribe(&handle, 8);
            let id = stream.id();
            // Calls run in order: once this one ran, so had the start. (No value is emitted here:
            // one refused as the stream goes would be emitted to the next subscriber.)
            handle.call(|_| ()).await.expect("the call runs");
            drop(stream);
            let (stopped, home, subscribed) = handle
                .call(|source| (source.stopped_on, source.home, source.subscriber.is_some()))
                .await
                .expect("calls run in order: the stop ran before this one");
            assert_eq!(stopped, Some((id, home.expect("the factory ran"))));
            assert!(!subscribed, "unsubscribed in the library");
            assert!(!pump.is_closed());

            // A stream the library ended (its emitter dropped) ends, and is not stopped again.
            let mut stream = subscribe(&handle, 8);
            handle
                .call(|source| {
                    source.stopped_on = None;
                    let emitter = source.subscriber.take().expect("subscribed");
                    emitter.emit(7).expect("room");
                })
                .await
                .expect("the call runs");
            assert_eq!(within("a value", stream.next()).await, Some(Ok(7)));
            assert_eq!(within("the end", stream.next()).await, None);
            drop(stream);
            assert_eq!(handle.call(|source| source.stopped_on).await, Ok(None));

            // Ended by the library, then the pump closed before anyone looked: a clean end.
            let mut stream = subscribe(&handle, 8);
            handle
                .call(|source| drop(source.subscriber.take()))
                .await
                .expect("the call runs");
            pump.close();
            assert_eq!(within("the end", stream.next()).await, None);
        });
    }
}

/// Found by a hostile probe: a subscription the library ended (it dropped the emitter) still
/// had its stop run at the close, if its stream was still held: an unsubscribe in C of what the
/// library had freed already. Held read to its end, or held unread, alike.
#[test]
fn a_close_does_not_stop_a_subscription_the_library_ended() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    for read_to_the_end in [true, false] {
        let stops = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = stops.clone();
        let (pump, handle) = source();
        let mut values = handle.subscribe(
            4,
            |source, emitter| source.subscriber = Some(emitter),
            move |_, _| {
                counted.fetch_add(1, SeqCst);
            },
        );
        futures_lite::future::block_on(async {
            within("a call", handle.call(|source| source.subscriber = None))
                .await
                .expect("the library ends it");
            if read_to_the_end {
                assert_eq!(within("the end", values.next()).await, None);
            }
            pump.close();
            within("closed()", pump.closed()).await.expect("closed");
        });
        drop(values);
        assert_eq!(stops.load(SeqCst), 0, "read to the end: {read_to_the_end}");
    }
}

/// What the library does in one run, right before it closes its own pump.
#[derive(Debug, Clone, Copy, PartialEq)]
enum BeforeTheClose {
    Emit,
    End,
    EmitAndEnd,
}

/// A state that does `before` and then closes its own pump, in one run.
struct Closing {
    pump: Option<Pump>,
    subscriber: Option<Emitter<u32>>,
    before: BeforeTheClose,
}

/// Found by a hostile probe: the library emitted a value, then the pump closed, while the
/// stream was being polled on another thread: the stream yielded the close reason and the value
/// was lost (2 – 13 times in 10 000); likewise an end by the library just before a close came
/// out as `Err(Closed)` instead of `None`. What came before the close now comes first.
#[test]
fn what_the_library_did_before_a_close_comes_before_its_reason() {
    use BeforeTheClose::{Emit, EmitAndEnd, End};
    for before in [Emit, End, EmitAndEnd] {
        let expected: Vec<Result<u32, Error>> = match before {
            Emit => vec![Ok(42), Err(Error::Closed)],
            End => vec![],
            EmitAndEnd => vec![Ok(42)],
        };
        let mut out_of_order = 0;
        for _ in 0..1_000 {
            let (pump, handle) = Pump::builder()
                .build_with_state(
                    move |_| {
                        Ok(Closing {
                            pump: None,
                            subscriber: None,
                            before,
                        })
                    },
                    |closing: &mut Closing, _| {
                        if closing.subscriber.is_some() && closing.pump.is_some() {
                            let pump = closing.pump.take().expect("looked");
                            if closing.before != End {
                                let subscriber = closing.subscriber.as_ref().expect("looked");
                                subscriber.emit(42).expect("room for it");
                            }
                            if closing.before != Emit {
                                closing.subscriber = None;
                            }
                            pump.close();
                        }
                        None::<Instant>
                    },
                )
                .expect("pump thread starts");
            let mut values = handle.subscribe(
                4,
                |closing: &mut Closing, emitter| closing.subscriber = Some(emitter),
                |_, _| {},
            );
            // Polled from another thread as fast as it can, until it ends.
            let consumer = std::thread::spawn(move || {
                let mut seen = Vec::new();
                loop {
                    let next = futures_lite::future::block_on(futures_lite::future::poll_once(
                        values.next(),
                    ));
                    match next {
                        None => continue,
                        Some(Some(value)) => seen.push(value),
                        Some(None) => return seen,
                    }
                }
            });
            let closer = pump.clone();
            let armed = handle.call(move |closing| closing.pump = Some(closer));
            futures_lite::future::block_on(within("a call", armed)).expect("armed");
            handle.kicker().kick();
            let seen = consumer.join().expect("the consumer ends");
            if seen != expected {
                out_of_order += 1;
                eprintln!("{before:?}: seen {seen:?}");
            }
        }
        assert_eq!(out_of_order, 0, "{before:?}: {expected:?} expected");
    }
}

/// Found by a hostile probe: a stream dropped while `run_once` ran, whose library then found the
/// emitter refused and not open and dropped it (as `Emitter::emit`'s example does), never had
/// its stop run — the emitter's drop counted as the library ending the subscription, which
/// cancelled the stop already on its way. A library whose stop unsubscribes in C leaked that.
#[test]
fn a_stream_dropped_while_the_library_runs_is_stopped_once() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::{mpsc, Arc, Mutex};
    let stops = Arc::new(AtomicUsize::new(0));
    let (entered, enter) = mpsc::channel::<()>();
    let (release, gate) = mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let hold = Arc::new(AtomicBool::new(false));
    let held = hold.clone();
    let (pump, library) = Pump::builder()
        .build_with_state(
            |_| Ok(Vec::<Emitter<u32>>::new()),
            move |subscribers, _| {
                if held.swap(false, SeqCst) {
                    let _ = entered.send(()); // in C, say
                    let _ = gate.lock().expect("one run at a time").recv();
                }
                subscribers.retain(|emitter| emitter.emit(1).is_ok() || emitter.is_open());
                None
            },
        )
        .expect("pump thread starts");
    let counted = stops.clone();
    futures_lite::future::block_on(within("the stream is stopped", async {
        let mut stream = library.subscribe(
            8,
            |subscribers, emitter| subscribers.push(emitter),
            move |_, _| {
                counted.fetch_add(1, SeqCst);
            },
        );
        assert_eq!(stream.next().await, Some(Ok(1)));
        hold.store(true, SeqCst);
        pump.kick();
        enter.recv().expect("the run is under way");
        drop(stream);
        release.send(()).expect("the run waits");
        pump.turn().await.expect("open");
        pump.close();
        pump.closed().await.expect("closed by close()");
    }));
    assert_eq!(stops.load(SeqCst), 1);
}

/// Found by a hostile probe: an emitter the library kept off its state (for a C thread, say)
/// still said it was open after the pump closed, and took a value, which the stream then
/// yielded as if it came before the close.
#[test]
fn an_emitter_takes_no_value_once_its_pump_closed() {
    let (pump, library) = Pump::builder()
        .build_with_state(|_| Ok(Vec::<Emitter<u32>>::new()), |_, _| None)
        .expect("pump thread starts");
    futures_lite::future::block_on(within("the stream ends", async {
        let mut stream = library.subscribe(
            8,
            |subscribers, emitter| subscribers.push(emitter),
            |_, _| {},
        );
        let emitter = library
            .call(|subscribers| subscribers.pop().expect("subscribed"))
            .await
            .expect("open");
        assert!(emitter.is_open());
        assert_eq!(emitter.emit(4), Ok(()));
        pump.close();
        pump.closed().await.expect("closed by close()");
        assert!(!emitter.is_open());
        assert_eq!(emitter.emit(5), Err(5), "after the close");
        assert_eq!(stream.next().await, Some(Ok(4)), "emitted before the close");
        assert_eq!(stream.next().await, Some(Err(Error::Closed)));
        assert_eq!(stream.next().await, None);
    }));
}

/// Found in review of the fix above: a library that ends a subscription itself (its C source
/// finished) and unsubscribes in C could not know whether the stream, dropped at that moment,
/// had its stop on the way too — it unsubscribed twice (113 of 200 races). `Emitter::end` says
/// which of the two unsubscribes: exactly one does, whichever order they come in.
#[test]
fn the_library_ending_a_subscription_and_its_stream_dropped_unsubscribe_once() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::{mpsc, Arc, Mutex};
    for stream_dropped_first in [true, false] {
        let (stops, ended_in_c) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (entered, enter) = mpsc::channel::<()>();
        let (release, gate) = mpsc::channel::<()>();
        let gate = Mutex::new(gate);
        let finish = Arc::new(AtomicBool::new(false));
        let (finishing, ended) = (finish.clone(), ended_in_c.clone());
        let (pump, library) = Pump::builder()
            .build_with_state(
                |_| Ok(Vec::<Emitter<u32>>::new()),
                move |sources, _| {
                    if !finishing.swap(false, SeqCst) {
                        return None;
                    }
                    let wait = || {
                        let _ = entered.send(());
                        let _ = gate.lock().expect("one run at a time").recv();
                    };
                    for source in sources.drain(..) {
                        if stream_dropped_first {
                            wait(); // the stream is dropped here
                        }
                        let ends = source.end();
                        if !stream_dropped_first {
                            wait(); // the stream is dropped here
                        }
                        if ends {
                            ended.fetch_add(1, SeqCst); // ffi::unsubscribe(…)
                        }
                    }
                    None
                },
            )
            .expect("pump thread starts");
        let counted = stops.clone();
        futures_lite::future::block_on(within("the subscription ends", async {
            let stream = library.subscribe(
                8,
                |sources, source| sources.push(source),
                move |_, _| {
                    counted.fetch_add(1, SeqCst); // ffi::unsubscribe(…)
                },
            );
            assert_eq!(
                library.call(|sources| sources.len()).await,
                Ok(1),
                "started"
            );
            finish.store(true, SeqCst);
            pump.kick();
            enter.recv().expect("the library ends it");
            drop(stream);
            release.send(()).expect("the run waits");
            pump.turn().await.expect("open");
            pump.turn().await.expect("open");
            pump.close();
            pump.closed().await.expect("closed by close()");
        }));
        let (stops, ended_in_c) = (stops.load(SeqCst), ended_in_c.load(SeqCst));
        assert_eq!(
            (stops, ended_in_c),
            if stream_dropped_first { (1, 0) } else { (0, 1) },
            "(stops, unsubscribed by the library), the stream dropped first: {stream_dropped_first}"
        );
    }
}

/// What `start` returns stays on the loop's thread (it holds an `Rc`: not `Send`) and goes to
/// the stop when the stream is dropped or the pump closes; once the library ends the
/// subscription — from the loop's thread, inside `start`, or from another thread — it is
/// dropped there, and no stop runs.
#[test]
fn what_start_returns_goes_to_the_stop_or_is_dropped_once_the_library_ends_it() {
    use common::Token;
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::{Arc, Mutex};

    let (token, live) = common::tokens();
    let stopped = Arc::new(Mutex::new(Vec::new()));
    let stop = {
        let stopped = stopped.clone();
        move || {
            let stopped = stopped.clone();
            move |_: &mut Vec<Emitter<u8>>, token: Token| stopped.lock().unwrap().push(token.0)
        }
    };
    let (pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(Vec::<Emitter<u8>>::new()), |_, _| None)
        .expect("pump thread starts");
    futures_lite::future::block_on(async {
        let subscribe = |n: u64| {
            let make = token.clone();
            handle.subscribe(
                4,
                move |held: &mut Vec<Emitter<u8>>, emitter| {
                    held.push(emitter);
                    make(n)
                },
                stop(),
            )
        };
        let ran = || within("a call", handle.call(|_| {}));

        // The stream dropped: the stop gets the very value.
        let dropped = subscribe(1);
        ran().await.expect("started");
        drop(dropped);
        ran().await.expect("the stop ran before this call");
        assert_eq!(*stopped.lock().unwrap(), [1]);
        assert_eq!(live.load(SeqCst), 0);

        // Ended by the library on the loop's thread: dropped there at once, no stop.
        let mut ended = subscribe(2);
        let end = handle.call(|held| held.pop().expect("subscribed").end());
        assert_eq!(within("the end", end).await, Ok(true));
        assert_eq!(live.load(SeqCst), 0, "dropped as the library ended it");
        assert_eq!(within("the stream's end", ended.next()).await, None);
        drop(ended);

        // Ended inside `start` (a library that refuses the subscription): dropped as it returns.
        let make = token.clone();
        let mut refused = handle.subscribe(
            4,
            move |_, emitter: Emitter<u8>| {
                drop(emitter);
                make(3)
            },
            stop(),
        );
        assert_eq!(within("the refusal", refused.next()).await, None);
        drop(refused);
        let live_now = live.clone();
        common::eventually("dropped as start returned", move || {
            live_now.load(SeqCst) == 0
        })
        .await;

        // Ended from another thread: dropped on the loop's thread at its next call or run.
        let elsewhere = subscribe(4);
        let emitter = handle
            .call(|held| held.pop().expect("subscribed"))
            .await
            .expect("open");
        let ended = std::thread::spawn(move || emitter.end())
            .join()
            .expect("ends");
        assert!(ended);
        ran().await.expect("a call after the word");
        assert_eq!(live.load(SeqCst), 0, "dropped on the loop's thread");
        drop(elsewhere);

        // Open at the close: the stop gets it, on the loop's thread, before it ends.
        let _open = subscribe(5);
        ran().await.expect("started");
        pump.close();
        pump.closed().await.expect("closed from outside the pump");
        assert_eq!(
            *stopped.lock().unwrap(),
            [1, 5],
            "no stop for what the library ended"
        );
        assert_eq!(live.load(SeqCst), 0);
    });
}

/// Found by a hostile probe: a close ended the stream with its reason while the stop was still
/// to run (or running) on the loop's thread, against "a close ends the stream with the pump's
/// reason, after running `stop`". Polled on the loop's thread itself, a stream the close ended
/// does not wait for a stop only that thread can run.
#[test]
fn a_close_ends_the_stream_only_after_its_stop_ran() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::{mpsc, Arc};
    let stopped = Arc::new(AtomicBool::new(false));
    let flag = stopped.clone();
    let (release, gate) = mpsc::channel::<()>();
    let (pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(Vec::<Emitter<u8>>::new()), |_, _| None)
        .expect("pump thread starts");
    let mut stream = handle.subscribe(
        4,
        |held: &mut Vec<Emitter<u8>>, emitter| held.push(emitter),
        move |_, ()| {
            // A slow unsubscribe in C.
            let _ = gate.recv_timeout(common::HANG);
            flag.store(true, SeqCst);
        },
    );
    futures_lite::future::block_on(async {
        within("a call", handle.call(|_| {}))
            .await
            .expect("started");
        pump.close();
        let mut end = std::pin::pin!(stream.next());
        let early = futures_lite::future::poll_once(end.as_mut()).await;
        assert!(early.is_none(), "ended before its stop ran: {early:?}");
        release.send(()).expect("the stop waits");
        let end = within("the stream's end", end).await;
        assert!(stopped.load(SeqCst), "its stop ran");
        assert_eq!(end, Some(Err(Error::Closed)));
        within("closed()", pump.closed()).await.expect("closed");
    });

    // Polled in another subscription's stop, on the loop's thread, as the close runs the stops.
    let (pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(Vec::<Emitter<u8>>::new()), |_, _| None)
        .expect("pump thread starts");
    // The close runs the stops in the order the subscriptions were made: the outer one's stop
    // runs before those of the streams it polls, made after it.
    let inner = Arc::new(std::sync::Mutex::new(
        Vec::<ffi_pump::Subscription<u8>>::new(),
    ));
    let polled = inner.clone();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let _outer = handle.subscribe(
        1,
        |held: &mut Vec<Emitter<u8>>, e| held.push(e),
        move |_, ()| {
            for mut inner in polled.lock().expect("unpoisoned").drain(..) {
                let end = futures_lite::future::block_on(inner.next());
                record.lock().expect("unpoisoned").push(end);
            }
        },
    );
    inner.lock().expect("unpoisoned").extend(
        (0..4).map(|_| {
            handle.subscribe(1, |held: &mut Vec<Emitter<u8>>, e| held.push(e), |_, ()| {})
        }),
    );
    futures_lite::future::block_on(async {
        within("a call", handle.call(|_| {}))
            .await
            .expect("started");
        pump.close();
        within("closed()", pump.closed()).await.expect("closed");
    });
    let seen = std::mem::take(&mut *seen.lock().expect("unpoisoned"));
    assert_eq!(seen.len(), 4, "every inner stream polled");
    assert!(
        seen.iter().all(|end| matches!(end, Some(Err(_)))),
        "ended on the loop's thread: {seen:?}"
    );
}

/// Found by a hostile probe: a stream the library ended, held but not polled since, still
/// counted as a pending wait, so a ticking loop went on running for nobody (200 runs in 200 ms).
/// Nothing more comes to it: it stops counting as the library ends it.
#[test]
fn a_stream_the_library_ended_no_longer_counts_as_pending() {
    let (pump, handle) = Pump::builder()
        .build_with_state(|_| Ok(Vec::<Emitter<u8>>::new()), |_, _| ())
        .expect("pump thread starts");
    let mut stream = handle.subscribe(1, |held: &mut Vec<Emitter<u8>>, e| held.push(e), |_, ()| {});
    futures_lite::future::block_on(async {
        let first = futures_lite::future::poll_once(stream.next()).await;
        assert!(first.is_none(), "nothing emitted yet");
        assert_eq!(pump.stats().pending_waits, 1, "the stream waits");
        within("the library ends it", handle.call(|held| held.clear()))
            .await
            .expect("open");
        assert_eq!(pump.stats().pending_waits, 0, "ended, not polled since");
        assert_eq!(stream.next().await, None);
    });
}

/// A library that keeps the values a full subscription refused, for its next run, gets that run
/// once the stream takes a value — also a loop that waits for nothing else (it says `None`:
/// nothing due). Found by a probe of the docs: the stream stalled after its capacity's worth.
#[test]
fn a_loop_that_keeps_refused_values_is_run_again_once_the_stream_has_room() {
    #[derive(Default)]
    struct Library {
        emitter: Option<Emitter<u32>>,
        backlog: std::collections::VecDeque<u32>,
    }
    futures_lite::future::block_on(async {
        let (pump, handle) = Pump::builder()
            .build_with_state(
                |_| Ok(Library::default()),
                |library: &mut Library, _| {
                    if let Some(emitter) = &library.emitter {
                        while let Some(value) = library.backlog.pop_front() {
                            if let Err(value) = emitter.emit(value) {
                                library.backlog.push_front(value);
                                break;
                            }
                        }
                    }
                    None::<std::time::Instant>
                },
            )
            .expect("pump thread starts");
        let mut values = handle.subscribe(
            2,
            |library: &mut Library, e| library.emitter = Some(e),
            |_, _| {},
        );
        within(
            "a call",
            handle.call(|library| library.backlog.extend(0..10)),
        )
        .await
        .expect("open");
        let mut got = Vec::new();
        for _ in 0..10 {
            let value = within("the next value", values.next()).await;
            got.push(value.expect("not ended").expect("a value"));
        }
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        drop(pump);
    });
}

/// Found by a hostile probe: a `start` that kept its emitter with the library, then panicked,
/// left the stream open — the library emitted into it, and no stop ever came. The stream ends
/// as the library would end it: the kept emitter is refused, and its `end` says the library
/// unsubscribes itself.
#[test]
fn a_start_that_kept_its_emitter_then_panicked_ends_the_stream() {
    futures_lite::future::block_on(async {
        let (_pump, bus) = Pump::builder()
            .build_with_state(|_| Ok(Vec::<Emitter<u32>>::new()), |_, _| None)
            .expect("pump thread starts");
        let stops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = stops.clone();
        let mut stream = bus.subscribe(
            4,
            |kept: &mut Vec<Emitter<u32>>, emitter| {
                kept.push(emitter);
                panic!("start panics after keeping its emitter (expected by this test)");
            },
            move |_, ()| {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            },
        );
        let refused = within("a call", bus.call(|kept| kept[0].emit(1).is_err())).await;
        assert_eq!(refused, Ok(true), "the kept emitter took a value");
        assert_eq!(within("the stream", stream.next()).await, None);
        let ended = within("a call", bus.call(|kept| kept.pop().expect("kept").end())).await;
        assert_eq!(ended, Ok(true), "its end says the library unsubscribes");
        drop(stream);
        within("a call", bus.call(|_| ())).await.expect("open");
        assert_eq!(
            stops.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "no stop"
        );
    });
}

/// A library that takes its subscribers out of its state to dispatch to them, emits, and
/// panics: the emitters unwind with `run_once`. `catch` guards the dispatch as a binding guards
/// a C callback. Returns what the stream yielded and how many stops ran.
fn emitter_unwinding_with_run_once(catch: bool) -> (Vec<Result<u32, Error>>, usize) {
    #[derive(Default)]
    struct Bus {
        subscribers: Vec<Emitter<u32>>,
        fail: bool,
    }
    fn dispatch(subscribers: Vec<Emitter<u32>>) {
        for subscriber in &subscribers {
            let _ = subscriber.emit(7);
        }
        panic!("a callback panics with the subscribers in hand (expected by this test)");
    }
    futures_lite::future::block_on(async {
        let (pump, bus) = Pump::builder()
            .build_with_state(
                |_| Ok(Bus::default()),
                move |bus: &mut Bus, _| {
                    if std::mem::take(&mut bus.fail) {
                        let subscribers = std::mem::take(&mut bus.subscribers);
                        match catch {
                            true => {
                                let guarded =
                                    std::panic::AssertUnwindSafe(|| dispatch(subscribers));
                                let _ = std::panic::catch_unwind(guarded);
                            }
                            false => dispatch(subscribers),
                        }
                    }
                    None
                },
            )
            .expect("pump thread starts");
        let stops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = stops.clone();
        let mut stream = bus.subscribe(
            4,
            |bus: &mut Bus, emitter| bus.subscribers.push(emitter),
            move |_, ()| {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            },
        );
        within("a call", bus.call(|bus| bus.fail = true))
            .await
            .expect("open");
        let mut seen = Vec::new();
        while let Some(item) = within("the stream", stream.next()).await {
            seen.push(item);
        }
        drop(stream);
        if catch {
            within("a call", bus.call(|_| ()))
                .await
                .expect("the pump goes on");
        }
        pump.close();
        within("the close", pump.closed()).await.expect("closed");
        (seen, stops.load(std::sync::atomic::Ordering::SeqCst))
    })
}

/// Found by a hostile probe: an emitter that unwound with a panic leaving `run_once` ended its
/// stream as if the library had let go of it (`None`, no stop): the subscriber could not tell a
/// failed pump from a subscription that ended.
#[test]
fn an_emitter_unwinding_with_a_panic_that_fails_the_pump_ends_its_stream_with_panicked() {
    let (seen, stops) = emitter_unwinding_with_run_once(false);
    assert_eq!(seen, [Ok(7), Err(Error::Panicked)]);
    assert_eq!(stops, 1, "the close unsubscribes it");
}

/// The same panic caught inside `run_once`: the library let go of the emitter, which ends the
/// stream as a drop does.
#[test]
fn an_emitter_unwinding_with_a_panic_run_once_catches_ends_its_stream() {
    let (seen, stops) = emitter_unwinding_with_run_once(true);
    assert_eq!(seen, [Ok(7)]);
    assert_eq!(stops, 0, "the library ended it: no stop");
}

/// Found by a hostile probe (a host-vtable binding): a stream dropped while its `start` still
/// waited for the busy loop's thread — after a poll, or unpolled — still had `start` run once
/// the thread was free (the library subscribed in C for nobody), and its stop right after.
/// Neither runs now.
#[test]
fn a_stream_dropped_before_its_start_ran_subscribes_nothing() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    for polled in [true, false] {
        let (starts, stops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (_pump, library) = Pump::builder()
            .build_with_state(|_| Ok(Vec::<Emitter<u32>>::new()), |_, _| None)
            .expect("pump thread starts");
        futures_lite::future::block_on(within("the stream", async {
            let release = common::hold_loop_thread(&library);
            let (started, stopped) = (starts.clone(), stops.clone());
            let mut stream = Box::pin(library.subscribe(
                8,
                move |subscribers, emitter| {
                    started.fetch_add(1, SeqCst);
                    subscribers.push(emitter);
                },
                move |_, ()| {
                    stopped.fetch_add(1, SeqCst);
                },
            ));
            if polled {
                assert!(futures_lite::future::poll_once(stream.next())
                    .await
                    .is_none());
            }
            drop(stream);
            release.send(()).expect("the post waits");
            let kept = library.call(|subscribers| subscribers.len()).await;
            assert_eq!(kept, Ok(0), "polled {polled}: no emitter kept");
            // A stream made after it still subscribes.
            let mut later = library.subscribe(8, |_, emitter| emitter.emit(5).is_ok(), |_, _| {});
            assert_eq!(later.next().await, Some(Ok(5)));
        }));
        assert_eq!(starts.load(SeqCst), 0, "polled {polled}: start ran");
        assert_eq!(stops.load(SeqCst), 0, "polled {polled}: stop ran");
    }
}
