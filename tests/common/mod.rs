//! The backends every behaviour test runs on, and helpers around the C fixture.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_executor::Executor;
use fake_loop::FakeLoop;
use ffi_pump::{Backend, Builder, Pump, Strategy};

/// Both wait strategies, for tests that must hold under each.
pub const STRATEGIES: [Strategy; 2] = [Strategy::PumpEvaluated, Strategy::Broadcast];

/// Where a test runs its tasks and its pump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rt {
    /// Pump spawned with `Backend::Smol`, tasks on smol's global executor.
    Smol,
    /// Pump spawned with `Backend::AsyncStd`, tasks on async-std.
    AsyncStd,
    /// Pump spawned with `Backend::Tokio`, tasks on a 4-worker multi-thread runtime.
    Tokio,
    /// No runtime: the pump future driven by a thread of its own (`Backend::Thread`), tasks on a
    /// plain `async-executor` run by two threads.
    Thread,
    /// The loop on the pump's own thread (`Builder::build_with_state`, with `run_once` as its
    /// state), which alone runs it; tasks as for `Thread`.
    LoopThread,
}

pub type Task<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How long a test body may run before it counts as hung.
const WATCHDOG: Duration = Duration::from_secs(60);

fn thread_executor() -> &'static Executor<'static> {
    static EXECUTOR: OnceLock<&'static Executor<'static>> = OnceLock::new();
    EXECUTOR.get_or_init(|| {
        let executor: &'static Executor<'static> = Box::leak(Box::new(Executor::new()));
        for _ in 0..2 {
            std::thread::spawn(move || {
                async_io::block_on(executor.run(futures_lite::future::pending::<()>()))
            });
        }
        executor
    })
}

impl Rt {
    /// Runs a test body to completion on this backend; fails it if it hangs for a minute.
    pub fn block_on<T>(self, body: impl Future<Output = T>) -> T {
        let body = futures_lite::FutureExt::or(body, async {
            async_io::Timer::after(WATCHDOG).await;
            panic!("the test body did not finish in {WATCHDOG:?}: something hangs");
        });
        match self {
            Rt::Smol => smol::block_on(body),
            Rt::AsyncStd => async_std::task::block_on(body),
            Rt::Tokio => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(4)
                .enable_all()
                .build()
                .expect("tokio runtime")
                .block_on(body),
            Rt::Thread | Rt::LoopThread => async_io::block_on(body),
        }
    }

    /// Spawns a task; the returned future yields its output.
    pub fn spawn<T: Send + 'static>(
        self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> Task<T> {
        match self {
            Rt::Smol => Box::pin(smol::spawn(task)),
            Rt::AsyncStd => Box::pin(async_std::task::spawn(task)),
            Rt::Tokio => {
                let handle = tokio::spawn(task);
                Box::pin(async move { handle.await.expect("tokio task panicked") })
            }
            Rt::Thread | Rt::LoopThread => Box::pin(thread_executor().spawn(task)),
        }
    }

    /// The backend that spawns this runtime's pump future. `LoopThread` has none of its own (its
    /// loop has a thread); a test that builds and spawns a pump future itself gets `Thread`'s.
    pub fn backend(self) -> Backend {
        match self {
            Rt::Smol => Backend::Smol,
            Rt::AsyncStd => Backend::AsyncStd,
            Rt::Tokio => Backend::Tokio,
            Rt::Thread | Rt::LoopThread => Backend::Thread,
        }
    }

    /// A pump around `run_once`, driven the way this backend drives it. Call inside `block_on`.
    pub fn pump_with(self, builder: Builder, run_once: impl FnMut() + Send + 'static) -> Pump {
        if self == Rt::LoopThread {
            let (pump, _loop) = builder
                .build_with_state(move |_| Ok(run_once), |run_once, _| run_once())
                .expect("pump thread starts");
            return pump;
        }
        let pump = builder.build(run_once).expect("valid pump settings");
        pump.spawn_on(self.backend()).expect("backend available");
        pump
    }

    /// A pump around the fixture's `run_once`, driven the way this backend drives it.
    pub fn pump(self, builder: Builder, fx: &Arc<FakeLoop>) -> Pump {
        let fx = fx.clone();
        self.pump_with(builder, move || {
            fx.run_once().expect("the pump never re-enters the loop");
        })
    }
}

/// A pump around a loop that does nothing, driven by a thread of its own, whose timer never
/// fires within a test: only `turn()` (and what waits ask for) runs it.
pub fn turned_only() -> Pump {
    Rt::Thread.pump_with(Pump::builder().interval(Duration::from_secs(3600)), || {})
}

/// Generates one `#[test]` per backend compiled in, each running `body` with that `Rt`.
#[macro_export]
macro_rules! on_every_backend {
    ($(fn $name:ident($rt:ident: Rt) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn body($rt: $crate::common::Rt) $body

            #[cfg(feature = "smol")]
            #[test]
            fn smol() {
                body($crate::common::Rt::Smol)
            }

            #[cfg(feature = "async-std")]
            #[test]
            fn async_std() {
                body($crate::common::Rt::AsyncStd)
            }

            #[cfg(feature = "tokio")]
            #[test]
            fn tokio() {
                body($crate::common::Rt::Tokio)
            }

            #[test]
            fn thread() {
                body($crate::common::Rt::Thread)
            }

            #[test]
            fn loop_thread() {
                body($crate::common::Rt::LoopThread)
            }
        }
    )*};
}

/// How long a step may take before a test calls it a hang.
pub const HANG: Duration = Duration::from_secs(10);

/// `future`, or a failure naming `what` if it does not finish within [`HANG`].
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    futures_lite::FutureExt::or(future, async {
        async_io::Timer::after(HANG).await;
        panic!("{what} did not finish within {HANG:?}: it hangs");
    })
    .await
}

/// Waits until `condition` holds, looking every millisecond, for at most 10 s.
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never happened: {what}"
        );
        async_io::Timer::after(Duration::from_millis(1)).await;
    }
}

/// Waits until `pump` counts exactly `n` pending waits, looking every millisecond, for at most
/// 10 s.
pub async fn pending(pump: &Pump, n: usize) {
    let started = std::time::Instant::now();
    loop {
        let seen = pump.stats().pending_waits;
        if seen == n {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the pump counted {seen} pending waits, never {n}, for 10 s"
        );
        async_io::Timer::after(Duration::from_millis(1)).await;
    }
}

/// Which threads of this process [`cpu_ticks`] counts.
#[derive(Debug, Clone, Copy)]
pub enum Threads<'a> {
    /// The calling thread.
    This,
    /// Those with this name (as given to `thread::Builder::name` or tokio's `thread_name`).
    Named(&'a str),
}

/// CPU time (user + system, in clock ticks, 10 ms each) that `threads` of this process have
/// used so far, read from `/proc`. Threads that ended are not counted.
pub fn cpu_ticks(threads: Threads<'_>) -> u64 {
    match threads {
        Threads::This => {
            let stat =
                std::fs::read_to_string("/proc/thread-self/stat").expect("/proc/thread-self/stat");
            parse_stat(&stat).expect("a /proc stat line").1
        }
        Threads::Named(name) => std::fs::read_dir("/proc/self/task")
            .expect("/proc/self/task")
            .flatten()
            // A thread that ended meanwhile has no stat left.
            .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
            .filter_map(|stat| {
                let (comm, ticks) = parse_stat(&stat)?;
                (comm == name).then_some(ticks)
            })
            .sum(),
    }
}

/// A thread's name and CPU ticks (utime + stime) from its `/proc/…/stat` line.
fn parse_stat(stat: &str) -> Option<(&str, u64)> {
    let (head, rest) = stat.rsplit_once(") ")?;
    let (_, comm) = head.split_once(" (")?;
    // After "(comm) ": state, ppid, … utime is field 14 of the line, stime 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((comm, ticks))
}

/// A fixture with `n` ids, each armed to become ready at a random moment within `spread`.
pub fn fixture_spread(n: u32, spread: Duration) -> Arc<FakeLoop> {
    let fx = Arc::new(FakeLoop::new(n));
    let spread_us = u64::try_from(spread.as_micros()).unwrap_or(u64::MAX).max(1);
    for id in 0..n {
        fx.arm_in(id, Duration::from_micros(fastrand::u64(0..spread_us)));
    }
    fx
}

/// Asserts the C side saw no overlapping and no re-entrant entries.
pub fn assert_clean(fx: &FakeLoop) {
    let stats = fx.stats();
    assert_eq!(
        stats.run_overlaps, 0,
        "runs overlapped another run: {stats:?}"
    );
    assert_eq!(
        stats.check_overlaps, 0,
        "checks overlapped a run: {stats:?}"
    );
    assert_eq!(stats.reentrant, 0, "the loop was re-entered: {stats:?}");
}

/// The fixture's call count and the pump's round count, read together under the loop lock so no
/// run is in progress between the two reads.
pub async fn calls_and_rounds(pump: &Pump, fx: &Arc<FakeLoop>) -> (u64, u64) {
    let (probe, fx) = (pump.clone(), fx.clone());
    pump.wait_for(move || Some((fx.stats().calls, probe.stats().rounds)))
        .timeout(Duration::from_secs(10))
        .await
        .expect("a check that holds at once completes")
}

/// A pump turned by the readiness of a library's descriptor (one end of a socket pair), built
/// from `configure(builder)` around `run_once`, with one wait pending; then the library closes
/// its descriptor and its peer, so the pump's duplicate is at EOF, readable forever. Returns how
/// the wait ended. Call inside `block_on`.
#[cfg(unix)]
pub async fn wait_while_the_library_closes_its_descriptor(
    rt: Rt,
    configure: impl FnOnce(Builder) -> Builder,
    run_once: impl FnMut() + Send + 'static,
) -> Result<(), ffi_pump::Error> {
    let (library_side, signal) = std::os::unix::net::UnixStream::pair().expect("socket pair");
    let builder = configure(
        Pump::builder()
            .interval(Duration::from_secs(1))
            .run_on_readable(&library_side),
    );
    let pump = rt.pump_with(builder, run_once);
    let waiting = rt.spawn({
        let pump = pump.clone();
        async move {
            pump.wait_until(|| false)
                .timeout(Duration::from_secs(10))
                .await
        }
    });
    pending(&pump, 1).await;
    drop(library_side);
    drop(signal);
    waiting.await
}

/// Raises this process's soft limit on open descriptors to 16 384 or the hard limit, whichever
/// is lower, once; fails the test, saying why, if the hard limit is below `need` (`what` says
/// what the tests hold).
#[cfg(unix)]
pub fn raise_open_files(need: u64, what: &str) {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    static RAISED: std::sync::Once = std::sync::Once::new();
    let hard = getrlimit(Resource::Nofile).maximum.unwrap_or(u64::MAX);
    assert!(
        hard >= need,
        "this machine allows {hard} open descriptors per process (`ulimit -Hn`); these tests \
         hold {what} and need {need}"
    );
    RAISED.call_once(|| {
        let limit = getrlimit(Resource::Nofile);
        let wanted = hard.min(16_384);
        if limit.current.is_some_and(|soft| soft < wanted) {
            let _ = setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(wanted),
                    maximum: limit.maximum,
                },
            );
        }
    });
}

/// Watches `fd` in `set` for `interest`, with the descriptor's number as the registration's
/// token (as `Descriptors::watch_only` does): for tests that watch each descriptor once.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn watch_fd(
    set: &ffi_pump::Descriptors,
    fd: impl std::os::fd::AsFd,
    interest: ffi_pump::Interest,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = fd.as_fd().as_raw_fd();
    set.watch(fd, interest, fd_token(fd))
}

/// Removes the registration [`watch_fd`] made for `fd`.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn unwatch_fd(set: &ffi_pump::Descriptors, fd: impl std::os::fd::AsFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    set.unwatch(fd_token(fd.as_fd().as_raw_fd()))
}

/// The token [`watch_fd`] gives the registration of descriptor `fd`.
#[cfg(unix)]
pub fn fd_token(fd: std::os::fd::RawFd) -> u64 {
    u64::try_from(fd).expect("an open descriptor's number is not negative")
}

/// A pump on tokio that runs on `fd`'s readiness (through tokio's reactor if
/// `tokio_readiness`), its runs counted in `runs`, turned once by a first driver task with a
/// standby driver beside it: the pump, the first task and the standby. Called inside a
/// multi-thread tokio runtime.
#[cfg(all(unix, feature = "tokio"))]
pub async fn pump_with_a_standby_driver(
    fd: &impl std::os::fd::AsFd,
    tokio_readiness: bool,
    runs: &Arc<std::sync::atomic::AtomicU64>,
) -> (
    Pump,
    tokio::task::JoinHandle<()>,
    tokio::task::JoinHandle<()>,
) {
    let counter = runs.clone();
    let pump = Pump::builder()
        .interval(Duration::MAX)
        .tokio_readiness(tokio_readiness)
        .run_on_readable(fd)
        .build(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
        .expect("valid settings");
    let first = tokio::spawn(pump.run());
    pump.turn().await.expect("open");
    let standby = tokio::spawn(pump.run());
    (pump, first, standby)
}

/// The end of a takeover test: the library's pipe written, a wait on the pump, the standby
/// driver dropped; what the wait ended with.
#[cfg(all(unix, feature = "tokio"))]
pub async fn wait_after_a_write(
    pump: &Pump,
    write: &impl std::os::fd::AsFd,
    standby: tokio::task::JoinHandle<()>,
) -> Result<(), ffi_pump::Error> {
    rustix::io::write(write, b"x").expect("written");
    let outcome = pump.wait_until(|| false).timeout(HANG).await;
    drop(standby);
    outcome
}

/// What a request's or a subscription's `start` returns in the tests of what the pump keeps:
/// numbered, not `Send` (it holds an `Rc`), counted live while it exists.
pub struct Token(
    pub u64,
    std::marker::PhantomData<std::rc::Rc<()>>,
    Arc<std::sync::atomic::AtomicUsize>,
);

impl Drop for Token {
    fn drop(&mut self) {
        self.2.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A maker of [`Token`]s, and the count of those alive.
pub fn tokens() -> (
    impl Fn(u64) -> Token + Clone + Send + 'static,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = live.clone();
    let make = move |n: u64| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Token(n, std::marker::PhantomData, counted.clone())
    };
    (make, live)
}

/// A connected pair on the loopback: the library's end (non-blocking) and its peer.
pub fn tcp_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let peer =
        std::net::TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
    let (socket, _) = listener.accept().expect("accept");
    socket.set_nonblocking(true).expect("non-blocking");
    peer.set_nodelay(true).expect("no delay");
    (socket, peer)
}

/// Holds `handle`'s loop thread in a post, entered when this returns, until the returned sender
/// sends or is dropped: what a test makes happen meanwhile meets a busy loop's thread.
#[allow(dead_code)] // not every test binary holds the thread
pub fn hold_loop_thread<S: 'static>(
    handle: &ffi_pump::LoopHandle<S>,
) -> std::sync::mpsc::Sender<()> {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (entered, inside) = std::sync::mpsc::channel::<()>();
    handle
        .post(move |_| {
            entered.send(()).expect("the test waits");
            let _ = held.recv();
        })
        .expect("open");
    inside.recv().expect("the post runs");
    release
}

/// The highest descriptor number this process has open (`/proc/self/fd`).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn highest_open_fd() -> std::os::fd::RawFd {
    (std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd"))
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .max()
        .expect("some descriptor")
}
