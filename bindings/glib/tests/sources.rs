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
use glib::{ControlFlow, IOCondition};

const HANG: Duration = Duration::from_secs(10);

fn fires(sources: &Sources) -> u64 {
    sources.counters().fires.load(Ordering::SeqCst)
}

#[test]
fn a_thousand_timeouts_fire_once_each_and_are_seen() {
    const SOURCES: u64 = 1_000;
    let sources = Arc::new(Sources::new().expect("pump thread"));
    smol::block_on(async {
        let tasks: Vec<_> = (0..SOURCES)
            .map(|n| {
                let sources = sources.clone();
                let delay = if n == 0 {
                    Duration::ZERO
                } else {
                    Duration::from_millis(fastrand::u64(1..200))
                };
                smol::spawn(async move { sources.after(delay).timeout(HANG).await })
            })
            .collect();
        for (n, task) in (0..).zip(tasks) {
            task.await.unwrap_or_else(|err| panic!("source {n}: {err}"));
        }
    });
    // Each was seen, so each fired at least once: as many fires as sources is once each.
    assert_eq!(fires(&sources), SOURCES, "fires of {SOURCES} sources");
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
    let sources = Sources::new().expect("pump thread");
    let outcome = smol::block_on(
        sources
            .after(Duration::from_secs(3600))
            .timeout(Duration::from_millis(50)),
    );
    assert_eq!(outcome, Err(Error::TimedOut));
}

/// Lets the pump thread take every source made so far into its iteration (the request's start
/// runs before the next run, which queries the new descriptors and timeouts).
async fn settle(sources: &Sources) {
    for _ in 0..2 {
        sources.pump().turn().await.expect("turn");
    }
}

#[test]
fn nothing_due_means_no_iteration() {
    let sources = Sources::new().expect("pump thread");
    smol::block_on(async {
        assert!(sources.owns_context().await.expect("call"));
        let _hour = sources.after(Duration::from_secs(3600));
        settle(&sources).await;
        let before = sources.counters().iterations.load(Ordering::SeqCst);
        smol::Timer::after(Duration::from_millis(300)).await;
        let after = sources.counters().iterations.load(Ordering::SeqCst);
        assert_eq!(
            after - before,
            0,
            "iterations while the only timeout was an hour out"
        );
        assert_eq!(fires(&sources), 0);
    });
}

#[test]
fn an_io_watch_fires_when_its_socket_is_written() {
    const WRITES: u64 = 20;
    let sources = Sources::new().expect("pump thread");
    let (reader, mut writer) = UnixStream::pair().expect("socket pair");
    reader.set_nonblocking(true).expect("non-blocking");
    smol::block_on(async {
        for n in 0..WRITES {
            let fired = sources.readable(reader.as_raw_fd()).timeout(HANG);
            settle(&sources).await;
            assert_eq!(fires(&sources), n, "watch {n} fired before the write");
            let written = Instant::now();
            writer.write_all(b"x").expect("write");
            fired.await.unwrap_or_else(|err| panic!("watch {n}: {err}"));
            // No tick could have found it: the pump has none, the timeouts it knows are none.
            let seen = written.elapsed();
            assert!(
                seen < Duration::from_millis(500),
                "watch {n} seen {seen:?} after the write"
            );
            let mut byte = [0_u8; 1];
            (&reader).read_exact(&mut byte).expect("read the byte back");
        }
    });
    assert_eq!(fires(&sources), WRITES, "one fire per watch");
    assert!(smol::block_on(sources.owns_context()).expect("call"));
}

/// GLib is handed what its own `poll()` would have said: a TCP peer that answers and closes has
/// only stopped writing — `G_IO_IN`, the answer still to read — while a socket closed both ways
/// is `G_IO_IN | G_IO_HUP`. A watch that took the first for a hang-up would drop the answer.
#[test]
fn an_io_watch_is_told_a_hang_up_only_when_poll_would_say_one() {
    let sources = Sources::new().expect("pump thread");
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let socket = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
    let (mut peer, _) = listener.accept().expect("accept");
    let (unix, unix_peer) = UnixStream::pair().expect("socket pair");
    smol::block_on(async {
        let answered = sources.readable(socket.as_raw_fd()).timeout(HANG);
        peer.write_all(b"bye").expect("write");
        drop(peer);
        let fired = answered.await.expect("the answer is seen");
        assert_eq!(fired.condition, IOCondition::IN, "the TCP peer's close");
        let mut answer = Vec::new();
        (&socket).read_to_end(&mut answer).expect("read");
        assert_eq!(answer, b"bye");

        let hung_up = sources.readable(unix.as_raw_fd()).timeout(HANG);
        drop(unix_peer);
        let fired = hung_up.await.expect("the hang-up is seen");
        assert_eq!(fired.condition, IOCondition::IN | IOCondition::HUP);
    });
}

/// Found by a hostile probe: GLib counts a timeout in 32-bit milliseconds, so 2^32 ms + 100 ms
/// fired after 100 ms, and a delay under a millisecond was rounded down to nothing.
#[test]
fn a_source_never_fires_before_its_delay() {
    let sources = Sources::new().expect("pump thread");
    smol::block_on(async {
        let wrapped = Duration::from_millis((1_u64 << 32) + 100);
        let early = sources.after(wrapped).timeout(Duration::from_millis(400));
        assert_eq!(
            early.await,
            Err(Error::TimedOut),
            "a delay of ~49.7 days fired"
        );
        let added = Instant::now();
        let fired = sources.after(Duration::from_micros(900)).timeout(HANG);
        let at = fired.await.expect("fired").at;
        assert!(
            at - added >= Duration::from_micros(900),
            "after {:?}",
            at - added
        );
        // Found by a later probe: the delay went to whole microseconds before it was rounded
        // up, so one under a microsecond fired at once, and 1 ms + 1 ns after 1 ms, not 2.
        for (delay, ms) in [
            (Duration::from_nanos(1), 1),
            (Duration::from_nanos(1_000_001), 2),
        ] {
            let added = Instant::now();
            let at = sources.after(delay).timeout(HANG).await.expect("fired").at;
            let after = at - added;
            assert!(
                after >= Duration::from_millis(ms),
                "{delay:?} after {after:?}"
            );
        }
    });
}

/// Found by a hostile probe (when sources had ids): a wait that timed out left its source
/// attached, to fire later.
#[test]
fn a_source_whose_wait_gave_up_never_fires() {
    let sources = Sources::new().expect("pump thread");
    smol::block_on(async {
        let given_up = sources
            .after(Duration::from_millis(100))
            .timeout(Duration::from_millis(10));
        assert_eq!(given_up.await, Err(Error::TimedOut));
        let later = sources.after(Duration::from_millis(300)).timeout(HANG);
        later.await.expect("fired"); // well past when the first would have fired
        assert_eq!(
            fires(&sources),
            1,
            "the given-up source was destroyed unfired"
        );
    });
}

/// GLib signals the context's wake-up descriptor when another thread attaches a source: the
/// pump, which has no tick, dispatches it.
#[test]
fn a_source_attached_from_another_thread_is_dispatched() {
    let sources = Sources::new().expect("pump thread");
    let (sent, received) = std::sync::mpsc::channel();
    smol::block_on(async {
        settle(&sources).await;
        let source = glib::idle_source_new(None, glib::Priority::DEFAULT, move || {
            let _ = sent.send(std::thread::current().name().map(str::to_string));
            ControlFlow::Break
        });
        source.attach(Some(sources.context()));
    });
    let thread = received.recv_timeout(HANG).expect("dispatched");
    assert_eq!(
        thread.as_deref(),
        Some("ffi-pump-loop"),
        "dispatched on the loop's thread"
    );
}

/// Found in review: `Sources` let go of its context at once and the loop's thread of the last
/// reference later, so a source of the caller's, attached to `context()` and dropped after
/// `Sources`, could lock the context as that thread freed it (`g_source_unref` locks the context
/// a source points to): heap corruption, 7 of 10 runs of 2 000 rounds.
#[test]
fn a_source_of_the_callers_dropped_after_sources_finds_the_context_gone_cleanly() {
    for _ in 0..10_000 {
        let sources = Sources::new().expect("pump thread");
        let mine: Vec<glib::Source> = (0..8)
            .map(|_| {
                let source = glib::timeout_source_new(
                    Duration::from_secs(3600),
                    None,
                    glib::Priority::DEFAULT,
                    || ControlFlow::Break,
                );
                source.attach(Some(sources.context()));
                source
            })
            .collect();
        drop(sources);
        drop(mine);
    }
}

/// What GLib's own loop tells a watch on a descriptor the kernel cannot wait for, it is told
/// here: a regular file is readable at once (`G_IO_IN`), a closed number is `G_IO_NVAL`. Both
/// never fired before: the pump's set refused them, and nothing else looked.
#[test]
fn a_watch_on_what_the_kernel_cannot_wait_for_fires_as_glibs_poll_says() {
    let sources = Sources::new().expect("pump thread");
    let path = std::env::temp_dir().join(format!("ffi-pump-glib-{}", std::process::id()));
    let file = std::fs::File::create(&path).expect("a regular file");
    // A number no descriptor of this process can hold (past any `RLIMIT_NOFILE`).
    let closed = i32::MAX - 1;
    smol::block_on(async {
        let fired = sources.readable(file.as_raw_fd()).timeout(HANG).await;
        let fired = fired.expect("the file's watch fired");
        assert!(fired.condition.contains(IOCondition::IN), "{fired:?}");
        let fired = sources.readable(closed).timeout(HANG).await;
        let fired = fired.expect("the closed number's watch fired");
        assert!(fired.condition.contains(IOCondition::NVAL), "{fired:?}");
    });
    drop(file);
    let _ = std::fs::remove_file(path);
    assert_eq!(fires(&sources), 2);
}

/// Found in review of the fix above: a record GLib lists for no events (a paused unix-fd
/// watch), which its own `poll()` still reports hung up or closed, never fired: the set keeps
/// such a registration out of the kernel, and it was not polled either. It is polled now.
#[test]
fn a_watch_for_no_events_is_told_a_hang_up_or_a_closed_number_as_glibs_poll_says() {
    let sources = Sources::new().expect("pump thread");
    let (mine, peer) = UnixStream::pair().expect("socket pair");
    drop(peer);
    for (fd, expected) in [
        (mine.as_raw_fd(), IOCondition::HUP),
        (i32::MAX - 1, IOCondition::NVAL),
    ] {
        let (told, dispatched) = std::sync::mpsc::channel();
        let source = glib_unix::fd_source_new(
            fd,
            IOCondition::empty(),
            None,
            glib::Priority::DEFAULT,
            move |_, why| {
                let _ = told.send(why);
                ControlFlow::Break
            },
        );
        source.attach(Some(sources.context()));
        let why = dispatched.recv_timeout(HANG);
        source.destroy();
        let why = why.unwrap_or_else(|_| panic!("fd {fd}: never dispatched"));
        assert!(why.contains(expected), "fd {fd}: {why:?}");
    }
}
