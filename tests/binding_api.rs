//! The binding API of a loop on its own thread (`Builder::build_with_state`): the factory and
//! its `Setup` (errors, panics, the kicker, the descriptor set), what `run_once` is told in its
//! `Run` (cause, deadline, ready registrations), and the shareable, keyed descriptor set as a
//! binding uses it from the loop's thread.
//!
//! The tests of this file take turns ([`alone`]): the descriptor tests count the pump's rounds
//! over a window, and the stale-descriptor test closes a watched descriptor, whose number another
//! test's socket must not take meanwhile.

mod common;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use common::{eventually, within, HANG};
use ffi_pump::{Cause, Error, FactoryError, Kicker, Pump};

/// One test of this file at a time (see the file's docs).
fn alone() -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

// --- The factory ----------------------------------------------------------------------------------

/// An error of the binding's own, for the factory to fail with.
#[derive(Debug, PartialEq, Eq)]
struct NoDevice {
    bus: u32,
}

impl fmt::Display for NoDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no device on bus {}", self.bus)
    }
}

impl std::error::Error for NoDevice {}

#[test]
fn a_factory_error_comes_back_as_error_factory_with_the_original_error_and_nothing_runs() {
    let _alone = alone();
    let ran = Arc::new(AtomicBool::new(false));
    // Held by `run_once`: once the build gave up, nothing holds it any more.
    let kept = Arc::new(());
    let (flag, held) = (ran.clone(), kept.clone());
    let outcome = Pump::builder().build_with_state(
        |_| -> Result<u32, FactoryError> { Err(Box::new(NoDevice { bus: 3 })) },
        move |_, _| {
            let _ = &held;
            flag.store(true, SeqCst);
            None
        },
    );
    let error = match outcome {
        Err(error) => error,
        Ok(_) => panic!("built although the factory failed"),
    };
    let Error::Factory(inner) = &error else {
        panic!("the factory's error came back as {error:?}, not Error::Factory");
    };
    assert_eq!(
        inner.downcast_ref::<NoDevice>(),
        Some(&NoDevice { bus: 3 }),
        "Error::Factory holds {inner:?}"
    );
    let source = std::error::Error::source(&error).expect("Error::Factory has a source");
    assert_eq!(
        source.downcast_ref::<NoDevice>(),
        Some(&NoDevice { bus: 3 }),
        "source() is {source:?}, not the factory's error"
    );
    assert!(
        error.to_string().contains("no device on bus 3"),
        "the message leaves out the factory's: {error}"
    );
    assert_eq!(error.clone(), error, "a clone is the same factory error");
    assert!(
        !ran.load(SeqCst),
        "run_once ran although the factory failed"
    );
    async_io::block_on(eventually("run_once is dropped", || {
        Arc::strong_count(&kept) == 1
    }));
    assert!(
        !ran.load(SeqCst),
        "run_once ran although the factory failed"
    );
}

#[test]
fn a_factory_panic_ends_the_build_with_panicked_within_10_s() {
    let _alone = alone();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    // The build waits for the factory: on a thread of its own, so a build that hangs fails the
    // test instead of hanging it.
    let (done, built) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let outcome = Pump::builder().build_with_state(
            |_| -> Result<u32, FactoryError> {
                panic!("the factory panics (expected by this test)")
            },
            move |_, _| {
                flag.store(true, SeqCst);
                None
            },
        );
        let _ = done.send(outcome.map(drop));
    });
    let outcome = built
        .recv_timeout(HANG)
        .unwrap_or_else(|why| panic!("the build did not return within {HANG:?}: {why}"));
    assert_eq!(outcome, Err(Error::Panicked));
    assert!(
        !ran.load(SeqCst),
        "run_once ran although the factory panicked"
    );
}

#[test]
fn a_kicker_from_the_setup_kept_in_the_state_kicks_and_never_keeps_the_pump_alive() {
    let _alone = alone();
    struct Library {
        kicker: Kicker,
        _dropped: SetOnDrop,
    }
    async_io::block_on(async {
        let dropped = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(AtomicU64::new(0));
        let (flag, counted) = (dropped.clone(), runs.clone());
        let (pump, handle) = Pump::builder()
            .build_with_state(
                move |setup| {
                    Ok(Library {
                        kicker: setup.kicker(),
                        _dropped: SetOnDrop(flag),
                    })
                },
                move |_, _| {
                    counted.fetch_add(1, SeqCst);
                    None
                },
            )
            .expect("pump thread starts");
        let kicker = within("a call", handle.call(|library| library.kicker.clone()))
            .await
            .expect("the call runs");
        // A turn ends with a run: what a call asked for is done by then.
        within("a turn", pump.turn()).await.expect("the pump runs");
        let before = runs.load(SeqCst);
        assert!(
            kicker.kick(),
            "the open pump did not hear the state's kicker"
        );
        eventually("the state's kicker runs the loop", || {
            runs.load(SeqCst) > before
        })
        .await;

        drop((pump, handle));
        eventually("the pump closes though its state holds a kicker", || {
            kicker.is_closed()
        })
        .await;
        eventually("the state is dropped", || dropped.load(SeqCst)).await;
        assert!(!kicker.kick(), "a closed pump hears a kick");
    });
}

// --- The run context ------------------------------------------------------------------------------

/// What one run was told.
#[derive(Debug, Clone, Copy)]
struct Told {
    cause: Cause,
    deadline_passed: bool,
    at: Instant,
}

#[test]
fn deadline_passed_is_false_at_first_and_true_with_cause_deadline_on_the_run_for_the_deadline() {
    let _alone = alone();
    const AHEAD: Duration = Duration::from_millis(50);
    async_io::block_on(async {
        let told = Arc::new(Mutex::new(Vec::<Told>::new()));
        let due = Arc::new(Mutex::new(None::<Instant>));
        let (record, reported) = (told.clone(), due.clone());
        let (pump, _loop) = Pump::builder()
            .build_with_state(
                |_| Ok(()),
                move |_, run| {
                    let now = Instant::now();
                    record.lock().unwrap().push(Told {
                        cause: run.cause(),
                        deadline_passed: run.deadline_passed(),
                        at: now,
                    });
                    // The first run reports a deadline; once it came, nothing more is due.
                    let due = *reported.lock().unwrap().get_or_insert(now + AHEAD);
                    (now < due).then_some(due)
                },
            )
            .expect("pump thread starts");
        // A pending wait makes the pump run once (to hear the deadline), then at the deadline.
        let (seen, asked) = (told.clone(), due.clone());
        let outcome = pump
            .wait_until(move || {
                let due = *asked.lock().unwrap();
                due.is_some_and(|due| seen.lock().unwrap().iter().any(|told| told.at >= due))
            })
            .timeout(HANG)
            .await;
        let told = told.lock().unwrap().clone();
        assert_eq!(outcome, Ok(()), "no run at the deadline: {told:?}");
        let due = due
            .lock()
            .unwrap()
            .expect("the first run reported a deadline");
        assert!(
            !told[0].deadline_passed,
            "the first run was told its deadline passed: {told:?}"
        );
        let early: Vec<_> = told.iter().filter(|told| told.at < due).collect();
        assert!(
            early.iter().all(|told| !told.deadline_passed),
            "a run before the deadline was told it passed: {told:?}"
        );
        let at_the_deadline = told
            .iter()
            .find(|told| told.at >= due)
            .expect("the wait saw it");
        assert!(
            at_the_deadline.deadline_passed,
            "the run at the deadline was not told it passed: {told:?}"
        );
        assert_eq!(
            at_the_deadline.cause,
            Cause::Deadline,
            "nothing but the deadline ran the loop then: {told:?}"
        );
    });
}

#[test]
fn a_post_a_kick_and_a_turn_from_another_thread_run_the_loop_as_a_kick() {
    let _alone = alone();
    async_io::block_on(async {
        // The causes of the runs that found a post's flag set, and of every run.
        let (after_post, all) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
        );
        let (record_post, record_all) = (after_post.clone(), all.clone());
        // A quiet loop: no deadline, no ticks, no wait; it runs only when asked to.
        let (pump, handle) = Pump::builder()
            .build_with_state(
                |_| Ok(false),
                move |posted: &mut bool, run| {
                    if std::mem::take(posted) {
                        record_post.lock().unwrap().push(run.cause());
                    }
                    record_all.lock().unwrap().push(run.cause());
                    None
                },
            )
            .expect("pump thread starts");
        handle.post(|posted| *posted = true).expect("posted");
        let seen = after_post.clone();
        eventually("the post's run", || !seen.lock().unwrap().is_empty()).await;
        assert_eq!(*after_post.lock().unwrap(), [Cause::Kick], "the post's run");

        within("a turn", pump.turn()).await.expect("the pump runs");
        let last = all.lock().unwrap().last().copied();
        assert_eq!(last, Some(Cause::Kick), "a turn asked from another thread");

        let before = all.lock().unwrap().len();
        pump.kick();
        let seen = all.clone();
        eventually("the kicked run", || seen.lock().unwrap().len() > before).await;
        assert_eq!(all.lock().unwrap()[before], Cause::Kick, "a kick");
    });
}

// --- The descriptor set, on the loop's thread -----------------------------------------------------

#[cfg(any(target_os = "linux", target_os = "android"))]
mod set {
    use super::*;
    use common::{cpu_ticks, Threads};
    use ffi_pump::{Descriptors, Interest, LoopHandle, Ready};
    use std::io::{self, Read, Write};
    use std::os::fd::{AsRawFd, RawFd};
    use std::os::unix::net::UnixStream;

    /// What a run was handed for one registration.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Seen {
        token: u64,
        readable: bool,
        writable: bool,
        hangup: bool,
        error: bool,
    }

    impl From<&Ready> for Seen {
        fn from(ready: &Ready) -> Seen {
            Seen {
                token: ready.token(),
                readable: ready.is_readable(),
                writable: ready.is_writable(),
                hangup: ready.is_hangup(),
                error: ready.is_error(),
            }
        }
    }

    /// Each run's cause and what `run.ready()` listed, in order.
    type Runs = Arc<Mutex<Vec<(Cause, Vec<Seen>)>>>;

    /// Every registration the runs were handed, in order.
    fn handed(runs: &Runs) -> Vec<Seen> {
        let runs = runs.lock().unwrap();
        runs.iter()
            .flat_map(|(_, seen)| seen.iter().copied())
            .collect()
    }

    /// Reads what `socket` (non-blocking) holds; how many bytes.
    fn drain(socket: &mut UnixStream) -> usize {
        let mut buf = [0_u8; 4096];
        let mut total = 0;
        while let Ok(n @ 1..) = socket.read(&mut buf) {
            total += n;
        }
        total
    }

    /// A socket pair: the library's end (non-blocking) and its peer.
    fn pair() -> (UnixStream, UnixStream) {
        let (socket, peer) = UnixStream::pair().expect("socket pair");
        socket.set_nonblocking(true).expect("non-blocking");
        (socket, peer)
    }

    /// A stand-in library: its socket, a clone of the pump's set (as its callbacks keep one),
    /// and what its runs saw.
    struct Library {
        set: Descriptors,
        socket: UnixStream,
        runs: Runs,
    }

    impl Library {
        /// Records this run.
        fn record(&self, run: &ffi_pump::Run<'_>) -> Vec<Seen> {
            let seen: Vec<Seen> = run.ready().iter().map(Seen::from).collect();
            self.runs.lock().unwrap().push((run.cause(), seen.clone()));
            seen
        }
    }

    /// Watches the library's socket for `interest` under `token`, from a call on the loop's thread.
    async fn watch_on_the_loop(library: &LoopHandle<Library>, interest: Interest, token: u64) {
        within(
            "a call",
            library.call(move |library| {
                let fd = library.socket.as_raw_fd();
                library.set.watch(fd, interest, token)
            }),
        )
        .await
        .expect("the call runs")
        .expect("watch");
    }

    /// A quiet loop on its own thread (no deadline, no wait: it runs only when asked or when its
    /// set is ready) around a library watching `socket` as `watch` says, handling each run with
    /// `handle`.
    fn library_pump(
        socket: UnixStream,
        watch: impl FnOnce(&Descriptors, RawFd) -> io::Result<()> + Send + 'static,
        mut handle: impl FnMut(&mut Library, &[Seen]) + Send + 'static,
    ) -> (Pump, LoopHandle<Library>, Runs) {
        let runs: Runs = Arc::default();
        let record = runs.clone();
        let (pump, library) = Pump::builder()
            .build_with_state(
                move |setup| {
                    let set = setup.descriptors()?;
                    watch(&set, socket.as_raw_fd())?;
                    Ok(Library {
                        set,
                        socket,
                        runs: record,
                    })
                },
                move |library, run| {
                    let seen = library.record(run);
                    handle(library, &seen);
                    None
                },
            )
            .expect("pump thread starts");
        (pump, library, runs)
    }

    #[test]
    fn descriptors_beside_run_on_readable_are_refused_as_a_factory_error_of_kind_invalid_input() {
        let _alone = alone();
        let (library_side, _peer) = pair();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let outcome = Pump::builder()
            .run_on_readable(&library_side)
            .build_with_state(
                |setup| {
                    setup.descriptors()?;
                    Ok(())
                },
                move |_, _| {
                    flag.store(true, SeqCst);
                    None
                },
            );
        match outcome {
            Err(Error::Factory(why)) => {
                let io = why
                    .downcast_ref::<io::Error>()
                    .unwrap_or_else(|| panic!("refused with {why:?}, not an io::Error"));
                assert_eq!(io.kind(), io::ErrorKind::InvalidInput, "refused with {io}");
            }
            Err(other) => panic!("refused with {other:?}, not Error::Factory"),
            Ok(_) => panic!("a descriptor set was made beside run_on_readable"),
        }
        assert!(
            !ran.load(SeqCst),
            "run_once ran although the factory failed"
        );

        // A factory that takes the refusal and goes on without a set builds a working pump.
        async_io::block_on(async {
            let (pump, handle) = Pump::builder()
                .run_on_readable(&library_side)
                .build_with_state(
                    |setup| Ok(setup.descriptors().err().map(|err| err.kind())),
                    |_, _| None,
                )
                .expect("the factory went on without a set");
            let refused = within("a call", handle.call(|refused| *refused)).await;
            assert_eq!(refused, Ok(Some(io::ErrorKind::InvalidInput)));
            within("a turn", pump.turn()).await.expect("the pump runs");
        });
    }

    #[test]
    fn run_ready_lists_the_registration_a_peer_wrote_to_and_is_empty_without_a_set() {
        let _alone = alone();
        async_io::block_on(async {
            let (socket, mut peer) = pair();
            let read = Arc::new(AtomicU64::new(0));
            let counted = read.clone();
            let (pump, _library, runs) = library_pump(
                socket,
                |set, fd| set.watch(fd, Interest::READABLE, 42),
                move |library, seen| {
                    if seen.iter().any(|seen| seen.token == 42 && seen.readable) {
                        counted.fetch_add(drain(&mut library.socket) as u64, SeqCst);
                    }
                },
            );
            // Nothing written yet: a run lists nothing.
            within("a turn", pump.turn()).await.expect("the pump runs");
            let last = runs.lock().unwrap().last().cloned();
            assert!(
                matches!(&last, Some((_, seen)) if seen.is_empty()),
                "with nothing written, the last run was handed {last:?}"
            );

            peer.write_all(b"hello").expect("write");
            eventually("the library reads what the peer wrote", || {
                read.load(SeqCst) == 5
            })
            .await;
            let runs = runs.lock().unwrap().clone();
            let (cause, seen) = runs
                .iter()
                .find(|(_, seen)| !seen.is_empty())
                .expect("a run was handed the socket");
            assert_eq!(
                seen,
                &[Seen {
                    token: 42,
                    readable: true,
                    writable: false,
                    hangup: false,
                    error: false
                }],
                "runs: {runs:?}"
            );
            assert_eq!(*cause, Cause::Readiness, "runs: {runs:?}");
        });

        // No set: a run caused by the readiness of `run_on_readable`'s descriptor lists nothing.
        async_io::block_on(async {
            let (socket, mut peer) = pair();
            let read = Arc::new(AtomicU64::new(0));
            let listed = Arc::new(Mutex::new(Vec::new()));
            let (counted, record) = (read.clone(), listed.clone());
            let (_pump, _library) = Pump::builder()
                .run_on_readable(&socket)
                .build_with_state(
                    move |_| Ok(socket),
                    move |socket, run| {
                        record.lock().unwrap().push(run.ready().len());
                        counted.fetch_add(drain(socket) as u64, SeqCst);
                        None
                    },
                )
                .expect("pump thread starts");
            peer.write_all(b"hello").expect("write");
            eventually("the loop reads what the peer wrote", || {
                read.load(SeqCst) == 5
            })
            .await;
            let listed = listed.lock().unwrap().clone();
            assert!(
                listed.iter().all(|&n| n == 0),
                "runs without a set listed registrations: {listed:?}"
            );
        });
    }

    #[test]
    fn several_registrations_on_one_descriptor_are_each_reported_with_their_own_token() {
        let _alone = alone();
        async_io::block_on(async {
            let (socket, mut peer) = pair();
            // A read watch (1) and a write watch (2, disabled) on one socket, as D-Bus makes them.
            // Each run reads what is readable; once writable, the write watch is turned off again
            // (the library wrote what it had), so nothing stays ready.
            let (pump, library, runs) = library_pump(
                socket,
                |set, fd| {
                    set.watch(fd, Interest::READABLE, 1)?;
                    set.watch(fd, Interest::NONE, 2)
                },
                |library, seen| {
                    for seen in seen {
                        match seen.token {
                            1 => {
                                drain(&mut library.socket);
                            }
                            2 => {
                                let fd = library.socket.as_raw_fd();
                                library.set.watch(fd, Interest::NONE, 2).expect("rewatch");
                            }
                            _ => {}
                        }
                    }
                },
            );
            let read_watch = Seen {
                token: 1,
                readable: true,
                writable: false,
                hangup: false,
                error: false,
            };
            let write_watch = Seen {
                token: 2,
                readable: false,
                writable: true,
                hangup: false,
                error: false,
            };
            peer.write_all(b"a").expect("write");
            let seen = runs.clone();
            eventually("the read watch is reported", || {
                handed(&seen).contains(&read_watch)
            })
            .await;
            let so_far = handed(&runs);
            assert!(
                so_far.iter().all(|seen| *seen == read_watch),
                "with the write watch disabled, the runs were handed {so_far:?}"
            );

            // The write watch turned on: the socket is writable, reported under token 2.
            let before = runs.lock().unwrap().len();
            watch_on_the_loop(&library, Interest::WRITABLE, 2).await;
            let seen = runs.clone();
            eventually("the write watch is reported", || {
                handed(&seen).contains(&write_watch)
            })
            .await;
            // And the read watch still under its own, both at once if both are ready.
            peer.write_all(b"b").expect("write");
            watch_on_the_loop(&library, Interest::WRITABLE, 2).await;
            let seen = runs.clone();
            eventually("both watches are reported again", || {
                let later: Vec<Seen> = seen.lock().unwrap()[before..]
                    .iter()
                    .flat_map(|(_, seen)| seen.iter().copied())
                    .collect();
                later.contains(&read_watch)
                    && later.iter().filter(|s| **s == write_watch).count() >= 2
            })
            .await;
            let all = handed(&runs);
            assert!(
                all.iter()
                    .all(|seen| *seen == read_watch || *seen == write_watch),
                "a registration reported under another's token or interest: {all:?}"
            );
            let mut watched = within("a call", library.call(|library| library.set.watched()))
                .await
                .expect("the call runs");
            watched.sort_by_key(|&(token, _, _)| token);
            let fd = within("a call", library.call(|library| library.socket.as_raw_fd()))
                .await
                .expect("the call runs");
            assert_eq!(
                watched,
                [(1, fd, Interest::READABLE), (2, fd, Interest::NONE)],
                "the set's registrations"
            );
            drop(pump);
        });
    }

    #[test]
    fn an_empty_interest_is_not_reported_and_does_not_wake_the_pump() {
        let _alone = alone();
        async_io::block_on(async {
            let (socket, mut peer) = pair();
            let (pump, library, runs) = library_pump(
                socket,
                |set, fd| set.watch(fd, Interest::NONE, 3),
                |library, seen| {
                    if seen.iter().any(|seen| seen.token == 4 && seen.readable) {
                        drain(&mut library.socket);
                    }
                },
            );
            // Settled: the pump's first run, if any, is over.
            within("a turn", pump.turn()).await.expect("the pump runs");
            let rounds = pump.stats().rounds;
            peer.write_all(b"x").expect("write");
            // Nothing to wait for: a window to see that nothing happens in. A pump woken by the
            // registration would run within microseconds, and again and again (the data stays).
            async_io::Timer::after(Duration::from_millis(100)).await;
            assert_eq!(
                pump.stats().rounds,
                rounds,
                "the pump ran with only an empty interest on a readable socket: {:?}",
                runs.lock().unwrap()
            );
            // Now a read registration on the same socket: reported, so the data was there.
            let woken_before = within(
                "a call",
                library.call(|library| {
                    let fd = library.socket.as_raw_fd();
                    library.set.watch(fd, Interest::READABLE, 4).expect("watch");
                    library
                        .runs
                        .lock()
                        .unwrap()
                        .iter()
                        .filter(|(cause, _)| *cause == Cause::Readiness)
                        .count()
                }),
            )
            .await
            .expect("the call runs");
            assert_eq!(
                woken_before, 0,
                "runs caused by readiness while the only registration asked for nothing"
            );
            let seen = runs.clone();
            eventually("the read registration is reported", || {
                handed(&seen)
                    .iter()
                    .any(|seen| seen.token == 4 && seen.readable)
            })
            .await;
            // (Reported in the run the call's kick made, most likely: one run, several causes.)
            let all = handed(&runs);
            assert!(
                all.iter().all(|seen| seen.token != 3),
                "the empty interest was reported: {all:?}"
            );
        });
    }

    #[test]
    fn the_librarys_callbacks_watch_and_unwatch_on_a_clone_of_the_set_while_handling_ready() {
        let _alone = alone();
        async_io::block_on(async {
            let (socket, mut peer) = pair();
            let (mut other, mut other_peer) = pair();
            let other_fd = other.as_raw_fd();
            let hops = Arc::new(AtomicU64::new(0));
            let counted = hops.clone();
            // Each readiness moves the watch to the other socket: token 10 on the library's
            // socket, token 20 on the other one, unwatching the one handled and watching the
            // next from inside the run, through a clone of the set, while the run's list is held.
            let (pump, library, _runs) = library_pump(
                socket,
                |set, fd| set.watch(fd, Interest::READABLE, 10),
                move |library, seen| {
                    let set = library.set.clone();
                    for seen in seen {
                        match seen.token {
                            10 => {
                                drain(&mut library.socket);
                                set.unwatch(10).expect("unwatch");
                                set.watch(other_fd, Interest::READABLE, 20).expect("watch");
                            }
                            20 => {
                                drain(&mut other);
                                set.unwatch(20).expect("unwatch");
                                let fd = library.socket.as_raw_fd();
                                set.watch(fd, Interest::READABLE, 10).expect("watch");
                            }
                            _ => continue,
                        }
                        assert_eq!(set.len(), 1, "{:?}", set.watched());
                        counted.fetch_add(1, SeqCst);
                    }
                },
            );
            for hop in 1..=6 {
                match hop % 2 {
                    1 => peer.write_all(b"x").expect("write"),
                    _ => other_peer.write_all(b"y").expect("write"),
                }
                let seen = hops.clone();
                eventually(&format!("hop {hop}"), || seen.load(SeqCst) >= hop).await;
            }
            assert_eq!(hops.load(SeqCst), 6);
            let watched = within("a call", library.call(|library| library.set.watched()))
                .await
                .expect("the loop's thread answers: no deadlock");
            assert_eq!(watched.len(), 1, "{watched:?}");
            assert_eq!(watched[0].0, 10, "{watched:?}");
            assert!(!pump.stats().panicked, "{:?}", pump.stats());
        });
    }

    #[test]
    fn a_peer_that_hung_up_is_reported_as_hangup_not_error() {
        let _alone = alone();
        async_io::block_on(async {
            let (socket, peer) = pair();
            // A library that closes its side of a connection its peer hung up: unwatch.
            let (pump, _library, runs) = library_pump(
                socket,
                |set, fd| set.watch(fd, Interest::READABLE, 5),
                |library, seen| {
                    if seen.iter().any(|seen| seen.token == 5 && seen.hangup) {
                        library.set.unwatch(5).expect("unwatch");
                    }
                },
            );
            drop(peer);
            let seen = runs.clone();
            eventually("the hang-up is reported", || {
                handed(&seen).iter().any(|seen| seen.token == 5)
            })
            .await;
            let reported: Vec<Seen> = handed(&runs);
            assert_eq!(
                reported[0],
                Seen {
                    token: 5,
                    readable: true,
                    writable: false,
                    hangup: true,
                    error: false
                },
                "a peer's hang-up: {reported:?}"
            );
            assert!(!pump.is_closed());
        });
    }

    /// Issue: a descriptor the library closed while it was watched, its file kept open by a
    /// duplicate elsewhere, with data pending, made the pump spin (50 736 runs in 300 ms at full
    /// CPU, still 35 869 after the library unwatched it): the kernel kept reporting a file the
    /// set could no longer name. Here the library closes first and unwatches after.
    #[test]
    fn a_descriptor_closed_while_watched_with_its_file_open_elsewhere_does_not_make_the_pump_spin()
    {
        let _alone = alone();
        const WINDOW: Duration = Duration::from_millis(300);
        async_io::block_on(async {
            let (socket, mut peer) = pair();
            // A second descriptor for the same file, kept open here (as a forked child would).
            let mut duplicate = socket.try_clone().expect("dup");
            let reported = Arc::new(AtomicU64::new(0));
            let counted = reported.clone();
            // The library does not read: it is about to close its socket.
            let (pump, library, runs) = library_pump(
                socket,
                |set, fd| set.watch(fd, Interest::READABLE, 1),
                move |_, seen| {
                    let n = seen.iter().filter(|seen| seen.token == 1).count();
                    counted.fetch_add(n as u64, SeqCst);
                },
            );
            peer.write_all(b"pending").expect("write");
            let seen = reported.clone();
            eventually("the pending data is reported", || seen.load(SeqCst) >= 1).await;
            // The library closes its descriptor before it unwatches it. (What takes its place
            // in the library's state is opened before, so it does not take the number.)
            let (placeholder, _placeholder_peer) = pair();
            let left = within(
                "a call",
                library.call(move |library| {
                    drop(std::mem::replace(&mut library.socket, placeholder));
                    library
                        .set
                        .unwatch(1)
                        .expect("unwatching a closed descriptor");
                    library.set.len()
                }),
            )
            .await
            .expect("the call runs");
            assert_eq!(left, 0, "unwatched");
            let ticks = within("a call", library.call(|_| cpu_ticks(Threads::This)))
                .await
                .expect("the call runs");
            let (rounds, reports) = (pump.stats().rounds, reported.load(SeqCst));
            let runs_before = runs.lock().unwrap().len();
            async_io::Timer::after(WINDOW).await;
            let spun = pump.stats().rounds - rounds;
            let again = reported.load(SeqCst) - reports;
            let causes: Vec<Cause> = runs.lock().unwrap()[runs_before..]
                .iter()
                .map(|(cause, _)| *cause)
                .collect();
            assert!(
                spun < 50,
                "{spun} runs in {WINDOW:?} after the library closed a watched descriptor whose \
                 file stays open (causes: {:?}...)",
                &causes[..causes.len().min(20)]
            );
            // Closed and unwatched in one call on the loop's thread: no run between the two.
            assert_eq!(
                again, 0,
                "the closed descriptor was handed after its unwatch"
            );
            let ticks_after = within("a call", library.call(|_| cpu_ticks(Threads::This)))
                .await
                .expect("the call runs");
            // Clock ticks are 10 ms: a spinning loop thread would spend ~30 in 300 ms.
            assert!(
                ticks_after - ticks < 15,
                "the loop's thread used {} clock ticks in {WINDOW:?}",
                ticks_after - ticks
            );
            // The file stayed readable all along: nothing consumed the data.
            duplicate.set_nonblocking(true).expect("non-blocking");
            let mut data = Vec::new();
            let _ = duplicate.read_to_end(&mut data);
            assert_eq!(data, b"pending");
            // The set goes on: the closed registration is let go of, a new one reported.
            within(
                "a call",
                library.call(|library| {
                    library.set.unwatch(1).expect("unwatch");
                    let fd = library.socket.as_raw_fd();
                    library.set.watch(fd, Interest::WRITABLE, 2).expect("watch");
                }),
            )
            .await
            .expect("the call runs");
            let seen = runs.clone();
            eventually("the new registration is reported", || {
                handed(&seen)
                    .iter()
                    .any(|seen| seen.token == 2 && seen.writable)
            })
            .await;
        });
    }

    /// As above, with the library never unwatching (its part broken, as a library that closes
    /// a connection and forgets its watch would): the set sees, when the file is next reported,
    /// that the number no longer names it, hands nothing for it, lets the registration go (as if
    /// unwatched) and moves off the leftover — no spin, nothing handed.
    #[test]
    fn a_descriptor_closed_while_watched_and_never_unwatched_is_let_go_of_without_a_spin() {
        let _alone = alone();
        const WINDOW: Duration = Duration::from_millis(300);
        async_io::block_on(async {
            let (socket, mut peer) = pair();
            let _duplicate = socket.try_clone().expect("dup");
            let reported = Arc::new(AtomicU64::new(0));
            let counted = reported.clone();
            let (pump, library, _runs) = library_pump(
                socket,
                |set, fd| set.watch(fd, Interest::READABLE, 1),
                move |_, seen| {
                    counted.fetch_add(seen.len() as u64, SeqCst);
                },
            );
            peer.write_all(b"pending").expect("write");
            let seen = reported.clone();
            eventually("the pending data is reported", || seen.load(SeqCst) >= 1).await;
            let (placeholder, _placeholder_peer) = pair();
            let close = move |library: &mut Library| {
                drop(std::mem::replace(&mut library.socket, placeholder));
            };
            within("a call", library.call(close)).await.expect("closed");
            let (rounds, reports) = (pump.stats().rounds, reported.load(SeqCst));
            async_io::Timer::after(WINDOW).await;
            let spun = pump.stats().rounds - rounds;
            assert!(spun < 50, "{spun} runs in {WINDOW:?} after the close");
            let again = reported.load(SeqCst) - reports;
            assert_eq!(again, 0, "handed after the library closed it");
            let left = within("a call", library.call(|library| library.set.len())).await;
            assert_eq!(left, Ok(0), "the set let go of the closed registration");
        });
    }
}

// --- The set at its edges: closed and reused numbers, bad numbers ------------------------------

#[cfg(any(target_os = "linux", target_os = "android"))]
mod set_edges {
    use super::*;
    use ffi_pump::{Descriptors, Interest};
    use std::io::Write;
    use std::os::fd::{AsFd, AsRawFd, RawFd};
    use std::os::unix::net::UnixStream;

    /// `Descriptors` docs ("The library's part"): a descriptor closed before it was unwatched,
    /// its file open elsewhere, is reported at most once after the unwatch. Its number taken by
    /// a new file meanwhile, the set must neither adopt that file (seen with a one-shot re-arm
    /// by number: the new file reported for ever under the old token) nor keep the old one.
    /// A set watching a socket under token 1; the socket closed without an unwatch while a
    /// duplicate keeps its file open with data pending; a new socket, with data of its own, that
    /// took its number. The set, the number, and what must stay open (the duplicate, the new
    /// socket, its peer); `None` if the new socket took another number.
    fn closed_and_reused() -> Option<(Descriptors, RawFd, [UnixStream; 3])> {
        let set = Descriptors::new().expect("a set");
        let (socket, mut peer) = UnixStream::pair().expect("socket pair");
        let number = socket.as_raw_fd();
        set.watch(number, Interest::READABLE, 1).expect("watch");
        let duplicate = socket.try_clone().expect("dup");
        peer.write_all(b"pending").expect("write");
        drop(socket); // closed without unwatching
        let (new, mut new_peer) = UnixStream::pair().expect("socket pair");
        if new.as_raw_fd() != number {
            eprintln!(
                "skipped: the new socket took {}, not {number}",
                new.as_raw_fd()
            );
            return None;
        }
        new_peer.write_all(b"unrelated").expect("write");
        Some((set, number, [duplicate, new, new_peer]))
    }

    #[test]
    fn a_closed_watched_number_taken_by_a_new_file_is_not_adopted_by_the_set() {
        let _alone = alone();
        let Some((set, number, _open)) = closed_and_reused() else {
            return;
        };
        set.unwatch(1).expect("unwatch after the close");
        let reports: usize = (0..5).map(|_| set.ready().len()).sum();
        assert!(
            reports <= 1,
            "{reports} reports in 5 calls after the unwatch (the set kept the old file or \
             adopted the new one numbered {number})"
        );
        assert!(set.is_empty());
    }

    /// [`closed_and_reused`], never unwatched. `after_a_look`: the set is asked what is ready
    /// before the library watches the new socket, else after. Either way the old file is never
    /// handed out, the old registration is let go of, and the new socket, watched under the
    /// number, is handed under its own token only. `None`: the new socket took another number.
    fn reused_without_an_unwatch(after_a_look: bool) -> Option<Vec<Vec<u64>>> {
        let (set, number, _open) = closed_and_reused()?;
        let tokens =
            |set: &Descriptors| -> Vec<u64> { set.ready().iter().map(|r| r.token()).collect() };
        let mut seen = Vec::new();
        if after_a_look {
            seen.extend((0..3).map(|_| tokens(&set)));
            assert!(set.is_empty(), "the closed registration is let go of");
        }
        set.watch(number, Interest::READABLE, 2)
            .expect("the new socket, under the number");
        seen.extend((0..3).map(|_| tokens(&set)));
        assert_eq!(
            set.len(),
            1,
            "only the new registration: {:?}",
            set.watched()
        );
        Some(seen)
    }

    #[test]
    fn a_closed_number_taken_by_a_new_socket_without_an_unwatch_hands_only_the_new_one() {
        let _alone = alone();
        for after_a_look in [true, false] {
            let Some(seen) = reused_without_an_unwatch(after_a_look) else {
                continue;
            };
            let expected: Vec<Vec<u64>> = match after_a_look {
                true => vec![vec![], vec![], vec![], vec![2], vec![2], vec![2]],
                false => vec![vec![2], vec![2], vec![2]],
            };
            assert_eq!(
                seen, expected,
                "ready() tokens, call by call (look first: {after_a_look})"
            );
        }
    }

    /// `unwatch` of a registration whose descriptor the library closed (what replaces `forget`)
    /// succeeds also when the number now names the set itself — a duplicate of the set, such as
    /// the one the pump keeps to watch it (it failed with `EINVAL`, seen in tests/descriptors.rs
    /// with `tokio_readiness`).
    #[test]
    fn unwatching_a_closed_descriptor_whose_number_now_names_the_set_succeeds() {
        let _alone = alone();
        let set = Descriptors::new().expect("a set");
        let (socket, _peer) = UnixStream::pair().expect("socket pair");
        let number = socket.as_raw_fd();
        set.watch(number, Interest::READABLE, 1).expect("watch");
        drop(socket); // closed without unwatching
        let duplicate = set.as_fd().try_clone_to_owned().expect("dup");
        if duplicate.as_raw_fd() != number {
            eprintln!(
                "skipped: the duplicate took {}, not {number}",
                duplicate.as_raw_fd()
            );
            return;
        }
        let unwatched = set.unwatch(1);
        assert!(set.is_empty(), "the registration is gone either way");
        assert!(unwatched.is_ok(), "unwatch: {unwatched:?}");
    }

    /// `Descriptors::watch` docs: `watch(-1, ..)` is an error (it panicked in a debug build:
    /// `BorrowedFd::borrow_raw(-1)` asserts).
    #[test]
    fn watching_descriptor_minus_one_is_an_error() {
        let _alone = alone();
        let set = Descriptors::new().expect("a set");
        let outcome =
            std::panic::catch_unwind(|| set.watch(-1, Interest::READABLE, 8).map_err(|e| e.kind()));
        assert!(
            matches!(outcome, Ok(Err(_))),
            "watch(-1) should fail: {outcome:?}"
        );
        assert!(set.is_empty());
    }
}
