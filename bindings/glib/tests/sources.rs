//! GLib sources through ffi-pump, iterated by prepare/query/check/dispatch with no tick: each
//! fires once, each wait sees it, no iteration while nothing is due, I/O watches fire on a write.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump::Error;
use ffi_pump_glib::Sources;
use glib::IOCondition;

const HANG: Duration = Duration::from_secs(10);

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
    assert!(counters.dispatches.load(Ordering::SeqCst) > 0);
    assert!(
        smol::block_on(sources.owns_context()).expect("call"),
        "the context had another owner"
    );
    // One iteration per round. A run may be in progress (the context's wake-ups turn the pump
    // whether or not a task waits): it counts its iteration when it starts and its round when it
    // ends, so look again until no run is between the two.
    let started = Instant::now();
    loop {
        let rounds = sources.pump().stats().rounds;
        let iterations = counters.iterations.load(Ordering::SeqCst);
        if iterations == rounds && sources.pump().stats().rounds == rounds {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{iterations} iterations for {rounds} rounds"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_source_that_never_fires_times_out() {
    let sources = Sources::new(1).expect("pump thread");
    sources.add(0, Duration::from_secs(3600));
    let outcome = smol::block_on(sources.fired(0, Duration::from_millis(50)));
    assert_eq!(outcome, Err(Error::TimedOut));
}

/// Lets the pump thread hear every source attached so far (the attach signals the context's
/// wake-up descriptor; the iteration after it queries the new descriptors and timeouts).
async fn settle(sources: &Sources) {
    for _ in 0..2 {
        sources.pump().turn().await.expect("turn");
    }
}

#[test]
fn nothing_due_means_no_iteration() {
    let sources = Sources::new(1).expect("pump thread");
    smol::block_on(async {
        assert!(sources.owns_context().await.expect("call"));
        sources.add(0, Duration::from_secs(3600));
        settle(&sources).await;
        let before = sources.counters().iterations.load(Ordering::SeqCst);
        smol::Timer::after(Duration::from_millis(300)).await;
        let after = sources.counters().iterations.load(Ordering::SeqCst);
        assert_eq!(
            after - before,
            0,
            "iterations while the only timeout was an hour out"
        );
        assert_eq!(sources.fires(0), 0);
    });
}

#[test]
fn an_io_watch_fires_when_its_socket_is_written() {
    const WRITES: u32 = 20;
    let sources = Sources::new(WRITES).expect("pump thread");
    let (reader, mut writer) = UnixStream::pair().expect("socket pair");
    reader.set_nonblocking(true).expect("non-blocking");
    smol::block_on(async {
        for id in 0..WRITES {
            sources.watch_readable(id, reader.as_raw_fd());
            settle(&sources).await;
            assert_eq!(sources.fires(id), 0, "watch {id} fired before the write");
            let written = Instant::now();
            writer.write_all(b"x").expect("write");
            sources
                .fired(id, Duration::from_secs(5))
                .await
                .unwrap_or_else(|err| panic!("watch {id}: {err}"));
            // No tick could have found it: the pump has none, the timeouts it knows are none.
            let seen = written.elapsed();
            assert!(
                seen < Duration::from_millis(500),
                "watch {id} seen {seen:?} after the write"
            );
            let mut byte = [0_u8; 1];
            (&reader).read_exact(&mut byte).expect("read the byte back");
        }
    });
    for id in 0..WRITES {
        assert_eq!(sources.fires(id), 1, "watch {id}");
    }
    assert!(smol::block_on(sources.owns_context()).expect("call"));
}

/// GLib is handed what its own `poll()` would have said: a TCP peer that answers and closes has
/// only stopped writing — `G_IO_IN`, the answer still to read — while a socket closed both ways
/// is `G_IO_IN | G_IO_HUP`. A watch that took the first for a hang-up would drop the answer.
#[test]
fn an_io_watch_is_told_a_hang_up_only_when_poll_would_say_one() {
    let sources = Sources::new(2).expect("pump thread");
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let socket = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
    let (mut peer, _) = listener.accept().expect("accept");
    let (unix, unix_peer) = UnixStream::pair().expect("socket pair");
    smol::block_on(async {
        sources.watch_readable(0, socket.as_raw_fd());
        peer.write_all(b"bye").expect("write");
        drop(peer);
        sources
            .fired(0, Duration::from_secs(5))
            .await
            .expect("the answer is seen");
        assert_eq!(
            sources.condition(0),
            IOCondition::IN,
            "the TCP peer's close"
        );
        let mut answer = Vec::new();
        (&socket).read_to_end(&mut answer).expect("read");
        assert_eq!(answer, b"bye");

        sources.watch_readable(1, unix.as_raw_fd());
        drop(unix_peer);
        sources
            .fired(1, Duration::from_secs(5))
            .await
            .expect("the hang-up is seen");
        assert_eq!(sources.condition(1), IOCondition::IN | IOCondition::HUP);
    });
}

/// Found by a hostile probe: GLib counts a timeout in 32-bit milliseconds, so 2^32 ms + 100 ms
/// fired after 100 ms, and a delay under a millisecond was rounded down to nothing.
#[test]
fn a_source_never_fires_before_its_delay() {
    let sources = Sources::new(2).expect("pump thread");
    smol::block_on(async {
        let wrapped = Duration::from_millis((1_u64 << 32) + 100);
        sources.add(0, wrapped);
        let early = sources.fired(0, Duration::from_millis(400)).await;
        assert_eq!(early, Err(Error::TimedOut), "a delay of ~49.7 days fired");
        let added = Instant::now();
        sources.add(1, Duration::from_micros(900));
        let at = sources.fired(1, HANG).await.expect("fired");
        assert!(
            at - added >= Duration::from_micros(900),
            "after {:?}",
            at - added
        );
    });
}

/// Found by a hostile probe: a wait that timed out left its source attached, and its fire was
/// the answer of the next wait on the id, for a source added after it fired.
#[test]
fn an_id_used_again_after_a_wait_timed_out_answers_with_its_new_source() {
    let sources = Sources::new(1).expect("pump thread");
    smol::block_on(async {
        sources.add(0, Duration::from_millis(100));
        let given_up = sources.fired(0, Duration::from_millis(10)).await;
        assert_eq!(given_up, Err(Error::TimedOut));
        smol::Timer::after(Duration::from_millis(300)).await; // when it would have fired
        let added = Instant::now();
        sources.add(0, Duration::from_millis(50));
        let at = sources.fired(0, HANG).await.expect("fired");
        assert!(
            at >= added + Duration::from_millis(50),
            "the old source's fire"
        );
        assert_eq!(
            sources.fires(0),
            1,
            "the given-up source was removed unfired"
        );
    });
}

/// Found in review: a second wait on an id, refused with `KeyInUse`, removed the source the
/// first wait waited for, which then timed out.
#[test]
fn a_refused_second_wait_leaves_the_first_waits_source_alone() {
    let sources = Arc::new(Sources::new(1).expect("pump thread"));
    smol::block_on(async {
        sources.add(0, Duration::from_millis(100));
        let waiting = sources.clone();
        let first = smol::spawn(async move { waiting.fired(0, HANG).await });
        while sources.pump().stats().pending_waits == 0 {
            smol::future::yield_now().await;
        }
        let second = sources.fired(0, Duration::from_millis(10)).await;
        assert_eq!(second, Err(Error::KeyInUse));
        assert!(first.await.is_ok(), "the first wait's source fired");
    });
}

/// A wait for an id no source can have panics at once, as attaching one does, rather than wait
/// out its timeout for a fire that cannot come.
#[test]
#[should_panic(expected = "out of range")]
fn waiting_for_an_id_out_of_range_panics() {
    let sources = Sources::new(1).expect("pump thread");
    let _ = smol::block_on(sources.fired(1, Duration::from_secs(60)));
}
