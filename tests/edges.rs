//! Edges nothing else covers: a zero interval on the pump-thread builders, deadlines at the ends
//! of `Instant`, more ready descriptors than one `Descriptors::ready` hands, descriptors epoll
//! refuses, and a thread the operating system refuses.
#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use common::{eventually, fd_token, unwatch_fd, watch_fd, Rt};
use ffi_pump::{Backend, Descriptors, Error, FactoryError, Interest, Pump, Setup};

// --- A zero interval on the pump-thread builders -------------------------------------------------

/// A factory that records whether it ran, and holds `kept` until it has: while a started thread
/// still has the factory, `kept` has two owners; once it ran, `ran` says so.
fn probe_factory<T>(
    kept: &Arc<()>,
    ran: &Arc<AtomicBool>,
    made: impl FnOnce(&mut Setup) -> Result<T, FactoryError> + Send + 'static,
) -> impl FnOnce(&mut Setup) -> Result<T, FactoryError> + Send + 'static {
    let (kept, ran) = (kept.clone(), ran.clone());
    move |setup| {
        ran.store(true, Ordering::SeqCst);
        drop(kept);
        made(setup)
    }
}

/// Builds a pump with the given builder around a [`probe_factory`] (made with the `Arc` and flag
/// given), and returns the outcome without the pump.
type Build = fn(ffi_pump::Builder, &Arc<()>, &Arc<AtomicBool>) -> Result<(), Error>;

/// The loops `build_with_state` makes, each named: one that ticks (the loop its own state, as
/// `build_on_thread` made it before), one that reports deadlines, and one whose factory takes the
/// pump's descriptor set (as `build_with_descriptors` made it before).
fn pump_thread_loops() -> [(&'static str, Build); 3] {
    [
        ("build_with_state, ticking", |builder, kept, ran| {
            let made = probe_factory(kept, ran, |_| Ok(|| {}));
            builder
                .build_with_state(made, |run_once, _| run_once())
                .map(drop)
        }),
        ("build_with_state, with deadlines", |builder, kept, ran| {
            let made = probe_factory(kept, ran, |_| Ok(()));
            builder.build_with_state(made, |_, _| None).map(drop)
        }),
        (
            "build_with_state, with a descriptor set",
            |builder, kept, ran| {
                let made = probe_factory(kept, ran, |setup| Ok(setup.descriptors()?));
                builder.build_with_state(made, |_, _| None).map(drop)
            },
        ),
    ]
}

/// Asserts `outcome` is `InvalidConfig` about the interval, and that no thread got the factory.
fn assert_refused_before_any_thread<T: std::fmt::Debug>(
    builder: &str,
    outcome: Result<T, Error>,
    kept: &Arc<()>,
    ran: &AtomicBool,
) {
    match outcome {
        Err(Error::InvalidConfig(why)) => assert!(
            why.contains("interval"),
            "{builder}: refused a zero interval for another reason: {why}"
        ),
        other => panic!("{builder} with a zero interval gave {other:?}, not InvalidConfig"),
    }
    assert_factory_unrun(builder, kept, ran);
}

/// Asserts that `builder` neither ran the factory of [`probe_factory`] nor still holds it.
fn assert_factory_unrun(builder: &str, kept: &Arc<()>, ran: &AtomicBool) {
    assert!(!ran.load(Ordering::SeqCst), "{builder}: the factory ran");
    assert_eq!(
        Arc::strong_count(kept),
        1,
        "{builder}: something still holds the factory (a thread that started anyway?)"
    );
}

#[test]
fn a_zero_interval_is_refused_by_the_pump_thread_builders_before_any_thread_starts() {
    for (builder, build) in pump_thread_loops() {
        let (kept, ran) = (Arc::new(()), Arc::new(AtomicBool::new(false)));
        let outcome = build(Pump::builder().interval(Duration::ZERO), &kept, &ran);
        assert_refused_before_any_thread(builder, outcome, &kept, &ran);
    }
}

// --- Deadlines at the ends of `Instant`, as `run_once` reports them ---------------------------------

/// The latest `Instant` this platform represents.
fn latest_instant() -> Instant {
    let (mut at, mut step) = (Instant::now(), Duration::MAX);
    while !step.is_zero() {
        match at.checked_add(step) {
            Some(later) => at = later,
            None => step /= 2,
        }
    }
    at
}

/// The earliest `Instant` this platform represents.
fn earliest_instant() -> Instant {
    let (mut at, mut step) = (Instant::now(), Duration::MAX);
    while !step.is_zero() {
        match at.checked_sub(step) {
            Some(earlier) => at = earlier,
            None => step /= 2,
        }
    }
    at
}

/// Deadlines too far away ever to come: `u64::MAX / 4` seconds from now (or the latest `Instant`
/// if that is not representable), and the latest `Instant`.
fn far_deadlines() -> [Instant; 2] {
    let latest = latest_instant();
    let far = Instant::now()
        .checked_add(Duration::from_secs(u64::MAX / 4))
        .unwrap_or(latest);
    [far, latest]
}

/// Deadlines long gone: an hour ago (or the earliest `Instant` if that is not representable), and
/// the earliest `Instant`.
fn past_deadlines() -> [Instant; 2] {
    let earliest = earliest_instant();
    let hour_ago = Instant::now()
        .checked_sub(Duration::from_secs(3600))
        .unwrap_or(earliest);
    [hour_ago, earliest]
}

/// Where a loop that reports deadlines lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// In the pump (`build`, `run_once` returning deadlines), spawned on the test's backend.
    InThePump,
    /// On the loop's own thread (`build_with_state`).
    LoopThread,
}

/// Where a backend can put such a loop: the pump thread only where the test runs without a runtime.
fn placements(rt: Rt) -> &'static [Placement] {
    match rt {
        Rt::Thread => &[Placement::InThePump, Placement::LoopThread],
        _ => &[Placement::InThePump],
    }
}

/// A loop whose `run_once` counts its runs and always reports `deadline`.
struct DeadlineLoop {
    pump: Pump,
    runs: Arc<AtomicU64>,
    /// `/proc/…/task/<tid>/stat` of the thread that made the first run, where one thread makes
    /// every run (`Rt::Thread`: the pump thread).
    runner: Arc<Mutex<Option<PathBuf>>>,
}

impl DeadlineLoop {
    /// Placed as asked, driven as `rt` drives pumps. Call inside `rt.block_on`.
    fn new(rt: Rt, placement: Placement, deadline: Instant) -> DeadlineLoop {
        let runs = Arc::new(AtomicU64::new(0));
        let runner = Arc::new(Mutex::new(None));
        let run_once = {
            let (runs, runner) = (runs.clone(), runner.clone());
            move || {
                if runs.fetch_add(1, Ordering::SeqCst) == 0 && rt == Rt::Thread {
                    // A link relative to /proc: "<pid>/task/<tid>".
                    let task = std::fs::read_link("/proc/thread-self").ok();
                    *runner.lock().unwrap() = task.map(|t| Path::new("/proc").join(t).join("stat"));
                }
                Some(deadline)
            }
        };
        let pump = match placement {
            Placement::InThePump => {
                let pump = Pump::builder().build(run_once).expect("valid settings");
                pump.spawn_on(rt.backend()).expect("backend available");
                pump
            }
            Placement::LoopThread => {
                let (pump, _loop) = Pump::builder()
                    .build_with_state(|_| Ok(()), move |_, _| run_once())
                    .expect("pump thread starts");
                pump
            }
        };
        DeadlineLoop { pump, runs, runner }
    }

    fn runs(&self) -> u64 {
        self.runs.load(Ordering::SeqCst)
    }

    /// How many runs the loop makes while this waits for `window`.
    async fn runs_during(&self, window: Duration) -> u64 {
        let before = self.runs();
        async_io::Timer::after(window).await;
        self.runs() - before
    }

    /// CPU time (user + system, clock ticks) of the thread that makes the runs, if one does.
    fn runner_cpu_ticks(&self) -> Option<u64> {
        let path = self.runner.lock().unwrap().clone()?;
        let stat = std::fs::read_to_string(path).ok()?;
        // After "(comm) ": state, ppid, … utime is field 14 of the line, stime 15.
        let (_, rest) = stat.rsplit_once(") ")?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        Some(fields[11].parse::<u64>().ok()? + fields[12].parse::<u64>().ok()?)
    }

    /// Asserts the pump is open and healthy.
    fn assert_open(&self, deadline: Instant) {
        let stats = self.pump.stats();
        assert!(
            !stats.closed && !stats.panicked,
            "with the loop's deadline at {deadline:?}, the pump ended: {stats:?}"
        );
    }
}

on_every_backend! {
    fn a_deadline_too_far_to_come_means_no_run_until_a_kick(rt: Rt) {
        for &placement in placements(rt) {
            for deadline in far_deadlines() { rt.block_on(async {
                eprintln!("{placement:?}, deadline {deadline:?}");
                let l = DeadlineLoop::new(rt, placement, deadline);
                // A pending wait makes the pump run once, to hear the deadline; then it sleeps.
                let started = Instant::now();
                let quiet = l.pump.wait_until(|| false).timeout(Duration::from_millis(200)).await;
                let waited = started.elapsed();
                assert_eq!(quiet, Err(Error::TimedOut));
                assert!(
                    waited >= Duration::from_millis(200) && waited < Duration::from_secs(10),
                    "a 200 ms timeout ended after {waited:?}"
                );
                assert_eq!(l.runs(), 1, "runs while a wait was pending for 200 ms");
                // The thread that runs the loop sleeps (rather than polling a timer it cannot
                // set): clock ticks are 10 ms, a spinning thread would spend ~30 in 300 ms.
                let ticks = l.runner_cpu_ticks();
                assert!(ticks.is_some() || rt != Rt::Thread, "the pump thread's CPU time is unreadable");
                let waiting = l.pump.wait_until(|| false).timeout(Duration::from_millis(300)).await;
                assert_eq!(waiting, Err(Error::TimedOut));
                if let (Some(before), Some(after)) = (ticks, l.runner_cpu_ticks()) {
                    assert!(after - before < 10, "the loop's thread spun for {} ticks in 300 ms", after - before);
                }
                l.assert_open(deadline);

                // A kick and a turn still run the loop.
                let before = l.runs();
                l.pump.kick();
                let runs = l.runs.clone();
                eventually("a kick runs the loop", || runs.load(Ordering::SeqCst) > before).await;
                let before = l.runs();
                assert_eq!(l.pump.turn().await, Ok(()));
                assert!(l.runs() > before, "a turn returned without a run");

                // A wait whose condition holds after the next run completes once a kick makes it.
                let done = Arc::new(AtomicBool::new(false));
                let waiting = rt.spawn({
                    let (pump, done) = (l.pump.clone(), done.clone());
                    async move {
                        pump.wait_until(move || done.load(Ordering::SeqCst))
                            .timeout(Duration::from_secs(10))
                            .await
                    }
                });
                let pump = l.pump.clone();
                eventually("the wait is pending", || pump.stats().pending_waits == 1).await;
                done.store(true, Ordering::SeqCst);
                l.pump.kick();
                assert_eq!(waiting.await, Ok(()));
                l.assert_open(deadline);
            }); }
        }
    }

    fn a_deadline_long_past_runs_the_loop_again_while_waited_for_and_not_when_idle(rt: Rt) {
        for &placement in placements(rt) {
            for deadline in past_deadlines() { rt.block_on(async {
                eprintln!("{placement:?}, deadline {deadline:?}");
                let l = DeadlineLoop::new(rt, placement, deadline);
                // Due at once, every time: while a wait is pending the pump runs again by itself.
                let runs = l.runs.clone();
                let fifty = l.pump.wait_until(move || runs.load(Ordering::SeqCst) >= 50)
                    .timeout(Duration::from_secs(10))
                    .await;
                assert_eq!(fifty, Ok(()), "only {} runs in 10 s of waiting", l.runs());

                // Running back to back, it leaves the executor to other tasks, and timeouts fire.
                let spinning = rt.spawn({
                    let pump = l.pump.clone();
                    async move { pump.wait_until(|| false).timeout(Duration::from_millis(300)).await }
                });
                let pump = l.pump.clone();
                eventually("the wait is pending", || pump.stats().pending_waits == 1).await;
                let before = l.runs();
                assert_eq!(rt.spawn(async { 7 }).await, 7);
                let started = Instant::now();
                let timed = l.pump.wait_until(|| false).timeout(Duration::from_millis(50)).await;
                assert_eq!(timed, Err(Error::TimedOut));
                assert!(started.elapsed() < Duration::from_secs(10), "a 50 ms timeout took {:?}", started.elapsed());
                assert_eq!(spinning.await, Err(Error::TimedOut));
                assert!(l.runs() > before, "no run while a wait was pending with the deadline past");

                // No wait pending: the runs stop (one in progress may finish).
                eventually("no wait is pending", || pump.stats().pending_waits == 0).await;
                let _finishing = l.runs_during(Duration::from_millis(50)).await;
                let more = l.runs_during(Duration::from_millis(200)).await;
                assert!(more <= 1, "{more} runs in 200 ms with no wait pending");
                l.assert_open(deadline);

                // A turn still runs the loop.
                let before = l.runs();
                assert_eq!(l.pump.turn().await, Ok(()));
                assert!(l.runs() > before, "a turn returned without a run");
                l.assert_open(deadline);
            }); }
        }
    }
}

// --- More ready descriptors than one `Descriptors::ready` hands -------------------------------------

/// The most descriptors one `Descriptors::ready` call hands (documented there).
const READY_PER_CALL: usize = 4_096;

/// How many ready descriptors the tests below hold: more than one call hands.
const MANY: usize = 5_000;

/// Serialises the tests that hold `MANY` descriptors, so that together they stay well within the
/// process's limit.
static MANY_DESCRIPTORS: Mutex<()> = Mutex::new(());

/// Takes the right to hold `MANY` descriptors, having raised this process's soft limit on open
/// descriptors to 16 384 or the hard limit, whichever is lower (as tests/descriptors.rs does).
fn allow_many_descriptors() -> MutexGuard<'static, ()> {
    let guard = MANY_DESCRIPTORS
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    common::raise_open_files(8_192, &format!("{MANY} sockets"));
    guard
}

/// `MANY` sockets whose peers hung up, by descriptor: each stays readable (at end of file) until
/// it is closed, like a library's connections whose servers went away.
fn hung_up_sockets() -> HashMap<RawFd, UnixStream> {
    (0..MANY)
        .map(|_| {
            let (socket, peer) = UnixStream::pair().expect("socket pair");
            drop(peer);
            (socket.as_raw_fd(), socket)
        })
        .collect()
}

/// What one `ready()` call hands: the descriptors, each checked readable and handed once.
fn handed_once(set: &Descriptors, call: usize) -> Vec<RawFd> {
    let handed = set.ready();
    assert!(
        handed.len() <= READY_PER_CALL,
        "ready() call {call} handed {} descriptors",
        handed.len()
    );
    assert!(
        handed.iter().all(|ready| ready.is_readable()),
        "ready() call {call} handed a hung-up socket as not readable: {handed:?}"
    );
    let fds: Vec<RawFd> = handed.iter().map(|ready| ready.fd()).collect();
    let distinct: HashSet<RawFd> = fds.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        fds.len(),
        "ready() call {call} handed a descriptor twice"
    );
    fds
}

#[test]
fn ready_hands_at_most_4096_descriptors_a_call_and_those_left_over_first_at_the_next() {
    let _many = allow_many_descriptors();
    let mut sockets = hung_up_sockets();
    let set = Descriptors::new().expect("an epoll set");
    for socket in sockets.values() {
        watch_fd(&set, socket, Interest::READABLE).expect("a socket can be watched");
    }

    // Nothing consumed: every descriptor stays ready (level-triggered), and the next call hands
    // first those the last one left over, so none waits behind descriptors that stay ready.
    let first: HashSet<RawFd> = handed_once(&set, 1).into_iter().collect();
    assert!(
        !first.is_empty(),
        "ready() handed nothing with {MANY} descriptors ready"
    );
    assert!(
        first.iter().all(|fd| sockets.contains_key(fd)),
        "ready() handed a descriptor that is not watched"
    );
    let second: HashSet<RawFd> = handed_once(&set, 2).into_iter().collect();
    let left_over = sockets.keys().filter(|fd| !first.contains(fd));
    let missed = left_over.filter(|fd| !second.contains(fd)).count();
    assert_eq!(
        missed,
        0,
        "the second ready() call left out {missed} of the {} descriptors the first left over",
        MANY - first.len()
    );

    // The library handles what it is handed (unwatches and closes a hung-up socket): the next
    // calls hand the others, each once, until none is left.
    let mut handled = HashSet::new();
    let mut calls = 0;
    loop {
        calls += 1;
        let handed = handed_once(&set, calls);
        if handed.is_empty() {
            break;
        }
        assert!(
            calls <= 10,
            "{calls} ready() calls and still not all handled"
        );
        for fd in handed {
            assert!(handled.insert(fd), "{fd} handed again after it was handled");
            let socket = sockets
                .remove(&fd)
                .expect("a handed descriptor is a watched socket");
            unwatch_fd(&set, &socket).expect("unwatch");
        }
    }
    assert_eq!(
        handled.len(),
        MANY,
        "{} of {MANY} ready descriptors handled",
        handled.len()
    );
    assert!(set.is_empty(), "{} descriptors still watched", set.len());
}

/// A library whose sockets all hung up: each run handles what `ready()` hands (unwatches and
/// closes each), and records how many it was handed.
struct HungUp {
    set: Descriptors,
    sockets: HashMap<RawFd, UnixStream>,
    /// How many descriptors each run was handed.
    per_run: Arc<Mutex<Vec<usize>>>,
    /// Every descriptor handed so far.
    handled: Arc<Mutex<HashSet<RawFd>>>,
    /// Descriptors handed again after they were handled.
    again: Arc<AtomicU64>,
}

impl HungUp {
    fn run(&mut self) -> Option<Instant> {
        let handed: Vec<RawFd> = self.set.ready().iter().map(|ready| ready.fd()).collect();
        self.per_run.lock().unwrap().push(handed.len());
        let mut handled = self.handled.lock().unwrap();
        for fd in handed {
            match self.sockets.remove(&fd) {
                Some(socket) => {
                    unwatch_fd(&self.set, &socket).expect("unwatch");
                    handled.insert(fd);
                }
                None => {
                    self.again.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        None
    }
}

on_every_backend! {
    fn each_run_is_handed_at_most_4096_ready_descriptors_and_the_pump_runs_again_for_the_others(rt: Rt) {
        let _many = allow_many_descriptors();
        let sockets = hung_up_sockets();
        let all: HashSet<RawFd> = sockets.keys().copied().collect();
        let per_run = Arc::new(Mutex::new(Vec::new()));
        let handled = Arc::new(Mutex::new(HashSet::new()));
        let again = Arc::new(AtomicU64::new(0));
        let library = {
            let (per_run, handled, again) = (per_run.clone(), handled.clone(), again.clone());
            move |set: Descriptors| {
                for socket in sockets.values() {
                    watch_fd(&set, socket, Interest::READABLE).expect("a socket can be watched");
                }
                HungUp { set, sockets, per_run, handled, again }
            }
        };
        rt.block_on(async {
            // On the loop's thread without a runtime; in the pump, watching the set, on one.
            let pump = if rt == Rt::Thread {
                let (pump, _loop) = Pump::builder()
                    .build_with_state(
                        move |setup| Ok(library(setup.descriptors()?)),
                        |library, _| library.run(),
                    )
                    .expect("pump thread starts");
                pump
            } else {
                let mut library = library(Descriptors::new().expect("an epoll set"));
                let pump = Pump::builder()
                    .run_on_readable(&library.set)
                    .build(move || library.run())
                    .expect("valid settings");
                pump.spawn_on(rt.backend()).expect("backend available");
                pump
            };
            let done = handled.clone();
            let outcome = pump.wait_until(move || done.lock().unwrap().len() == MANY)
                .timeout(Duration::from_secs(20))
                .await;
            let per_run = per_run.lock().unwrap().clone();
            let handled = handled.lock().unwrap().clone();
            assert_eq!(
                outcome,
                Ok(()),
                "{} of {MANY} ready descriptors handed, in runs handed {per_run:?}",
                handled.len()
            );
            assert!(
                per_run.iter().all(|&n| n <= READY_PER_CALL),
                "a run was handed more than {READY_PER_CALL}: {per_run:?}"
            );
            assert_eq!(handled, all, "handed descriptors that are not the library's");
            assert_eq!(again.load(Ordering::SeqCst), 0, "descriptors handed after they were unwatched");
            // The library's descriptors are closed before the next test may take as many.
            pump.close();
            pump.closed().await.expect("closed from outside the pump");
        });
    }
}

// --- Descriptors epoll refuses --------------------------------------------------------------------

/// Asserts `outcome` failed with the OS error `expected`.
fn assert_refused(what: &str, outcome: io::Result<()>, expected: rustix::io::Errno) {
    match outcome {
        Err(err) => assert_eq!(
            err.raw_os_error(),
            Some(expected.raw_os_error()),
            "watching {what} failed with {err:?}, not {expected:?}"
        ),
        Ok(()) => panic!("watching {what} succeeded"),
    }
}

/// Asserts the set still works after refusing `refused`: it kept no record of it, watches as
/// many descriptors as `before`, and watches a new socket and hands it once it is ready.
fn assert_usable_after_refusing(set: &Descriptors, before: usize, refused: RawFd) {
    assert_eq!(
        set.len(),
        before,
        "the set counts the descriptor it refused"
    );
    assert!(
        set.watched().iter().all(|&(_, fd, _)| fd != refused),
        "the set records {refused}, which it refused"
    );
    assert_usable(set);
}

/// Asserts the set watches a new socket, hands it once it is ready, and forgets it unwatched.
fn assert_usable(set: &Descriptors) {
    let before = set.len();
    let (socket, mut peer) = UnixStream::pair().expect("socket pair");
    watch_fd(set, &socket, Interest::READABLE).expect("the set still watches a socket");
    let fd = socket.as_raw_fd();
    let early: Vec<_> = set
        .ready()
        .into_iter()
        .filter(|ready| ready.fd() == fd)
        .collect();
    assert!(
        early.is_empty(),
        "{fd} was handed before it was ready: {early:?}"
    );
    peer.write_all(b"!").expect("write");
    let ready: Vec<_> = set
        .ready()
        .into_iter()
        .filter(|ready| ready.fd() == fd)
        .collect();
    assert!(
        ready.len() == 1 && ready[0].is_readable(),
        "with {fd} readable, ready() handed {ready:?} for it"
    );
    unwatch_fd(set, &socket).expect("unwatch");
    assert_eq!(set.len(), before, "unwatching left a record");
}

#[test]
fn watching_a_descriptor_that_is_not_open_fails_with_ebadf_and_the_set_stays_usable() {
    // No process ever has this descriptor open: the kernel keeps descriptor numbers below its
    // largest `fs.nr_open`, 2^31 - 64.
    const NEVER_OPEN: RawFd = RawFd::MAX;
    let set = Descriptors::new().expect("an epoll set");
    assert_refused(
        "a descriptor that is not open",
        set.watch(NEVER_OPEN, Interest::READABLE, fd_token(NEVER_OPEN)),
        rustix::io::Errno::BADF,
    );
    assert_usable_after_refusing(&set, 0, NEVER_OPEN);
}

#[test]
fn watching_a_regular_file_fails_with_eperm_and_the_set_stays_usable() {
    let file = File::open(std::env::current_exe().expect("the test binary's path"))
        .expect("the test binary opens");
    let set = Descriptors::new().expect("an epoll set");
    let (kept, _peer) = UnixStream::pair().expect("socket pair");
    watch_fd(&set, &kept, Interest::WRITABLE).expect("a socket can be watched");
    assert_refused(
        "a regular file",
        watch_fd(&set, &file, Interest::READABLE | Interest::WRITABLE),
        rustix::io::Errno::PERM,
    );
    assert_usable_after_refusing(&set, 1, file.as_raw_fd());
    assert_eq!(
        set.watched(),
        [(
            fd_token(kept.as_raw_fd()),
            kept.as_raw_fd(),
            Interest::WRITABLE
        )],
        "the refusal changed what else the set watches"
    );
}

#[test]
fn a_set_watching_itself_fails_with_eloop_and_stays_usable() {
    let set = Descriptors::new().expect("an epoll set");
    // Another descriptor for what the set hands the reactor: its registrations live in an inner
    // epoll instance, which that one holds, so watching it there is a loop.
    let itself = set.as_fd().try_clone_to_owned().expect("dup");
    assert_refused(
        "the set itself",
        watch_fd(&set, &itself, Interest::READABLE),
        rustix::io::Errno::LOOP,
    );
    assert_usable_after_refusing(&set, 0, itself.as_raw_fd());
}

#[test]
fn two_sets_watching_each_other_fail_with_eloop_and_both_stay_usable() {
    let outer = Descriptors::new().expect("an epoll set");
    let inner = Descriptors::new().expect("an epoll set");
    watch_fd(&outer, &inner, Interest::READABLE).expect("a set can watch another set");
    assert_refused(
        "a set that watches this one",
        watch_fd(&inner, &outer, Interest::READABLE),
        rustix::io::Errno::LOOP,
    );
    assert_usable_after_refusing(&inner, 0, outer.as_fd().as_raw_fd());
    // The nesting that was accepted still works: a socket ready in the inner set makes the inner
    // set ready in the outer one.
    let (socket, mut peer) = UnixStream::pair().expect("socket pair");
    watch_fd(&inner, &socket, Interest::READABLE).expect("a socket can be watched");
    peer.write_all(b"!").expect("write");
    let ready = outer.ready();
    assert!(
        ready.len() == 1 && ready[0].fd() == inner.as_fd().as_raw_fd() && ready[0].is_readable(),
        "with the inner set ready, the outer set handed {ready:?}"
    );
    assert_usable(&outer);
}

// --- A thread the operating system refuses --------------------------------------------------------

/// Set in the child process that
/// `the_pump_thread_builders_report_a_thread_the_os_refuses_and_nothing_hangs` starts: there it
/// refuses new threads, which it cannot do beside other tests.
const REFUSING_THREADS: &str = "FFI_PUMP_TEST_REFUSING_THREADS";

/// What the child prints when this system cannot be made to refuse a thread.
const CANNOT_REFUSE: &str = "cannot refuse threads here: ";

/// The child's limits as they were, put back on drop.
struct Refusing {
    resource: rustix::process::Resource,
    before: rustix::process::Rlimit,
}

impl Drop for Refusing {
    fn drop(&mut self) {
        rustix::process::setrlimit(self.resource, self.before)
            .expect("the limit goes back up to where it was");
    }
}

/// The process's virtual memory size, in bytes.
fn address_space() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb = status
        .lines()
        .find_map(|line| line.strip_prefix("VmSize:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .expect("VmSize in /proc/self/status");
    kb * 1024
}

/// Makes the OS refuse new threads in this process, and says how it does, or why it cannot: a
/// limit on the address space just above what is mapped now, too little for a new thread's stack
/// (which root cannot ignore, unlike the limit on processes); failing that, the limit on
/// processes. Checks with a plain `std::thread` that a thread is refused, and returns the error.
fn refuse_threads() -> Result<(Refusing, io::ErrorKind), String> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    // Less than a thread's stack (2 MiB, and `RUST_MIN_STACK` is unset in the child), enough for
    // the small allocations the test makes meanwhile.
    const HEADROOM: u64 = 512 * 1024;
    let mut tried = Vec::new();
    for resource in [Resource::As, Resource::Nproc] {
        let before = getrlimit(resource);
        let current = match resource {
            Resource::As => address_space() + HEADROOM,
            _ => 1,
        };
        if let Err(err) = setrlimit(
            resource,
            Rlimit {
                current: Some(current),
                maximum: before.maximum,
            },
        ) {
            tried.push(format!("{resource:?}: setrlimit failed ({err})"));
            continue;
        }
        let refusing = Refusing { resource, before };
        match std::thread::Builder::new().spawn(|| ()) {
            Err(err) => return Ok((refusing, err.kind())),
            Ok(thread) => {
                tried.push(format!("{resource:?} at {current}: a thread still started"));
                drop(refusing);
                thread.join().expect("the probe thread");
            }
        }
    }
    Err(tried.join("; "))
}

/// The body, in the child process.
fn refused_threads_in_child() {
    // async-io's reactor starts a thread of its own when first used, and panics if it cannot:
    // start it now, while threads are allowed.
    async_io::block_on(async_io::Timer::after(Duration::from_millis(1)));
    let (refusing, kind) = match refuse_threads() {
        Ok(refused) => refused,
        Err(why) => {
            println!("{CANNOT_REFUSE}{why}");
            return;
        }
    };
    let refused = Err::<(), _>(Error::ThreadSpawn(kind));
    println!(
        "threads refused with {kind:?}, by a limit on {:?}",
        refusing.resource
    );

    for (builder, build) in pump_thread_loops() {
        let (kept, ran) = (Arc::new(()), Arc::new(AtomicBool::new(false)));
        let outcome = build(Pump::builder(), &kept, &ran);
        assert_eq!(outcome, refused, "{builder}");
        assert_factory_unrun(builder, &kept, &ran);
    }

    // `spawn_on(Backend::Thread)` says so too, and closes the pump (as documented): its waits and
    // turns end at once rather than wait for a driver that never came.
    let pump = Pump::new(|| {});
    assert_eq!(
        pump.spawn_on(Backend::Thread),
        refused,
        "spawn_on(Backend::Thread)"
    );
    assert!(
        pump.is_closed(),
        "a pump whose thread was refused is open: {:?}",
        pump.stats()
    );
    futures_lite::future::block_on(async {
        let wait = pump
            .wait_until(|| false)
            .timeout(Duration::from_secs(10))
            .await;
        assert_eq!(
            wait,
            Err(Error::Closed),
            "a wait on the pump whose thread was refused"
        );
        assert_eq!(
            pump.turn().await,
            Err(Error::Closed),
            "a turn on the pump whose thread was refused"
        );
    });

    // Threads allowed again, the same builders work.
    drop(refusing);
    let (pump, _loop) = Pump::builder()
        .build_with_state(|_| Ok(|| {}), |loop_, _| loop_())
        .expect("a pump thread starts");
    let turned = futures_lite::future::block_on(common::within("a turn", pump.turn()));
    assert_eq!(turned, Ok(()), "a turn with the pump thread started");
    let pump = Pump::new(|| {});
    pump.spawn_on(Backend::Thread)
        .expect("a pump thread starts");
    assert_eq!(
        futures_lite::future::block_on(common::within("a turn", pump.turn())),
        Ok(())
    );
}

#[test]
fn the_pump_thread_builders_report_a_thread_the_os_refuses_and_nothing_hangs() {
    const NAME: &str = "the_pump_thread_builders_report_a_thread_the_os_refuses_and_nothing_hangs";
    if std::env::var_os(REFUSING_THREADS).is_some() {
        return refused_threads_in_child();
    }
    // Refusing threads is for the whole process: the body runs alone, in a child process that
    // runs this test binary again on this test only.
    let mut child = Command::new(std::env::current_exe().expect("the test binary's path"))
        .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(REFUSING_THREADS, "1")
        .env_remove("RUST_MIN_STACK")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the test binary starts again");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the child process with threads refused did not finish in 60 s: something hangs"
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = child.wait_with_output().expect("the child's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("the child process:\n{stdout}");
    assert!(
        status.success(),
        "the child process with threads refused failed ({status}):\n{stdout}\n{stderr}"
    );
    if let Some(why) = stdout
        .lines()
        .find_map(|line| line.strip_prefix(CANNOT_REFUSE))
    {
        println!("skipped: the OS could not be made to refuse a thread: {why}");
        return;
    }
    assert!(
        stdout.contains("1 passed"),
        "the child process did not run the test:\n{stdout}\n{stderr}"
    );
}

/// A drop that waits for a slow check of its block (here 300 ms) sleeps between its looks
/// instead of spinning: found by a hostile probe, whose dropping thread ran at a full core for
/// as long as the check took.
#[test]
fn a_drop_waiting_for_a_slow_check_does_not_burn_a_core() {
    use std::future::Future;
    use std::task::{Context, Wake, Waker};
    struct NoWake;
    impl Wake for NoWake {
        fn wake(self: Arc<Self>) {}
    }
    let pump = Pump::builder().build(|| {}).expect("valid settings");
    pump.spawn_on(Backend::Thread).expect("a thread");
    let entered = Arc::new(AtomicBool::new(false));
    let inside = entered.clone();
    let mut calls = 0;
    let mut wait = Box::pin(pump.wait_until(move || {
        calls += 1;
        // The first poll's own check; then the pump's, slow.
        if calls > 1 {
            inside.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(300));
        }
        false
    }));
    let waker = Waker::from(Arc::new(NoWake));
    assert!(wait
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    pump.kick();
    futures_lite::future::block_on(eventually("the pump's check", || {
        entered.load(Ordering::SeqCst)
    }));
    let (ticks, started) = (common::cpu_ticks(common::Threads::This), Instant::now());
    drop(wait);
    let (ticks, took) = (
        common::cpu_ticks(common::Threads::This) - ticks,
        started.elapsed(),
    );
    assert!(
        took >= Duration::from_millis(100),
        "the drop waited for the check: {took:?}"
    );
    assert!(
        ticks <= 10,
        "{ticks} ticks of CPU (10 ms each) in a drop of {took:?}"
    );
}
