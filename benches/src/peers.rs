//! The approaches under comparison and how each awaits an id of the C fixture.
//!
//! Peers 1–4 are what wrappers of C event loops write today; they are kept small and plain on
//! purpose, flaws included (the flaws are what the benchmark shows).

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use async_executor::Executor;
use fake_loop::{now_ns, FakeLoop};
use ffi_pump::{Backend, Builder, Completions, Pump, Strategy};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::collect::Collector;
use crate::polls::Timed;
use crate::{tokio_runtime, Workload, INTERVAL, WORKERS};

/// One way of awaiting "id is done".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Approach {
    /// 1. `poll` runs the loop, checks, and if not ready wakes itself and returns `Pending`.
    Naive,
    /// 2. `poll` runs the loop only if a thread-local "already ran" flag is clear; `Pending`
    ///    clears it.
    ThreadLocal,
    /// 3. `poll` runs the loop only if an active counter was 0 (`fetch_add` / `fetch_sub`).
    Atomic,
    /// 4. A background task runs the loop and notifies a `tokio::sync::Notify` every 1 ms.
    Background1ms,
    /// 4. The same every 10 ms.
    Background10ms,
    /// 4. A thread blocks on the fixture's ready descriptor, runs the loop when it is readable
    ///    and wakes the waiter of each finished id through that id's own `tokio::sync::Notify`:
    ///    the least a readiness-driven wrapper can do (no lock, registry or table), as the
    ///    baseline of ffi-pump's readiness row.
    ReadinessThread,
    /// 5. ffi-pump, default configuration at 1 ms, on the same tokio runtime.
    PumpTokio,
    /// 5. ffi-pump with the broadcast strategy of the core protocol, on the same tokio runtime.
    PumpTokioBroadcast,
    /// 5. ffi-pump, default configuration at 1 ms, on a 2-thread smol executor.
    PumpSmol,
    /// 5. ffi-pump with completion-driven waits (`run_once` reports finished ids into a
    ///    `Completions` table), on the same tokio runtime.
    PumpCompletions,
    /// 5. ffi-pump, completion-driven, turned by the fixture's ready descriptor (readiness), with
    ///    the interval timer at 1 s as a mere fallback, on the same tokio runtime.
    PumpReadiness,
    /// 5. The same on a 2-thread smol executor, whose idle threads poll async-io's reactor
    ///    themselves (on tokio, readiness reaches the pump through async-io's own thread).
    PumpReadinessSmol,
    /// 5. `PumpReadiness` with the pump on a thread of its own (`Backend::Thread`), which polls
    ///    async-io's reactor itself, and the waits on the same tokio runtime.
    PumpReadinessThread,
    /// 5. `PumpReadiness` with `tokio_readiness(true)`: tokio's own reactor watches the
    ///    descriptor, so a readiness wakes the worker parked on it instead of async-io's thread.
    PumpReadinessTokioReactor,
    /// 5. ffi-pump, completion-driven, sleeping until the fixture's next deadline
    ///    (`build` with a `run_once` that returns its deadline), kicked once the ids are armed, on the same tokio runtime.
    PumpHinted,
    /// 6. The simple registry a careful user could write: a background task runs the loop every
    ///    1 ms (tokio's interval) and then, under the same mutex, `extract_if`s the pending waits
    ///    (one `HashMap`)
    ///    whose check holds and wakes them; a wait checks once under that mutex before it
    ///    registers. What ffi-pump's default strategy must at least match.
    SimpleRegistry,
    /// 6. [`Approach::SimpleRegistry`] as the cost issue (#24) draws it: its rounds turned by an
    ///    async-io `Timer` every 1 ms and guarded by an async mutex taken with `try_lock`, the
    ///    parts the pump's shape fixes. On tokio, async-io's timer fires on async-io's own thread,
    ///    which then wakes a worker: the price of the shape, which tokio's interval does not pay.
    SimpleRegistryAsyncIo,
    /// 5. ffi-pump's default (pump-evaluated) with its timer off and a tokio task calling
    ///    `turn()` every 1 ms instead (tokio's interval): the pump on the simple registry's
    ///    timer, so the two differ only in how they keep and evaluate the waits.
    PumpTokioTurned,
}

impl Approach {
    /// Every approach, in table order.
    pub const ALL: [Approach; 18] = [
        Approach::Naive,
        Approach::ThreadLocal,
        Approach::Atomic,
        Approach::Background1ms,
        Approach::Background10ms,
        Approach::ReadinessThread,
        Approach::PumpTokio,
        Approach::PumpTokioBroadcast,
        Approach::PumpSmol,
        Approach::PumpCompletions,
        Approach::PumpReadiness,
        Approach::PumpReadinessSmol,
        Approach::PumpReadinessThread,
        Approach::PumpReadinessTokioReactor,
        Approach::PumpHinted,
        Approach::SimpleRegistry,
        Approach::PumpTokioTurned,
        Approach::SimpleRegistryAsyncIo,
    ];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Approach::Naive => "naive",
            Approach::ThreadLocal => "thread-local",
            Approach::Atomic => "atomic",
            Approach::Background1ms => "background-1ms",
            Approach::Background10ms => "background-10ms",
            Approach::ReadinessThread => "readiness-thread",
            Approach::PumpTokio => "ffi-pump-tokio",
            Approach::PumpTokioBroadcast => "ffi-pump-tokio-broadcast",
            Approach::PumpSmol => "ffi-pump-smol",
            Approach::PumpCompletions => "ffi-pump-completions",
            Approach::PumpReadiness => "ffi-pump-readiness",
            Approach::PumpReadinessSmol => "ffi-pump-readiness-smol",
            Approach::PumpReadinessThread => "ffi-pump-readiness-thread",
            Approach::PumpReadinessTokioReactor => "ffi-pump-readiness-tokio-reactor",
            Approach::PumpHinted => "ffi-pump-hinted",
            Approach::SimpleRegistry => "simple-registry",
            Approach::SimpleRegistryAsyncIo => "simple-registry-async-io",
            Approach::PumpTokioTurned => "ffi-pump-tokio-turned",
        }
    }

    /// Parses [`Approach::name`].
    pub fn from_name(name: &str) -> Option<Approach> {
        Approach::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The wait strategy of an ffi-pump approach (the default for the others, which ignore it).
    pub fn strategy(self) -> Strategy {
        match self {
            Approach::PumpTokioBroadcast => Strategy::Broadcast,
            _ => Strategy::default(),
        }
    }

    /// Whether this is ffi-pump.
    pub fn is_pump(self) -> bool {
        matches!(
            self,
            Approach::PumpTokio
                | Approach::PumpTokioBroadcast
                | Approach::PumpSmol
                | Approach::PumpCompletions
                | Approach::PumpReadiness
                | Approach::PumpReadinessSmol
                | Approach::PumpReadinessThread
                | Approach::PumpReadinessTokioReactor
                | Approach::PumpHinted
                | Approach::PumpTokioTurned
        )
    }
}

/// When each id was seen done by its future ([`now_ns`] clock), indexed by id.
pub type Seen = Vec<u64>;

/// Ticks the pump took more than one interval late (ffi-pump approaches only).
static LATE_TICKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

/// The pump's late ticks in the last ffi-pump run of this process, `None` for the peers.
pub fn late_ticks() -> Option<u64> {
    match LATE_TICKS.load(Ordering::SeqCst) {
        u64::MAX => None,
        late => Some(late),
    }
}

/// Records a finished pump's late ticks and closes it.
fn close_counting(pump: &Pump) {
    LATE_TICKS.store(pump.stats().late_ticks, Ordering::SeqCst);
    pump.close();
}

/// Runs `workload.n` concurrent waits with `approach`, arming the ids once they are spawned;
/// returns when each saw its id done.
pub fn run(approach: Approach, workload: &Workload) -> Seen {
    let fx = &workload.fx;
    match approach {
        Approach::Naive => on_tokio(workload, |id| Naive::new(fx.clone(), id)),
        Approach::ThreadLocal => on_tokio(workload, |id| ThreadLocal::new(fx.clone(), id)),
        Approach::Atomic => {
            let active = Arc::new(AtomicUsize::new(0));
            on_tokio(workload, |id| Atomic::new(fx.clone(), active.clone(), id))
        }
        Approach::Background1ms => background(workload, INTERVAL),
        Approach::Background10ms => background(workload, Duration::from_millis(10)),
        Approach::ReadinessThread => readiness_thread(workload),
        Approach::PumpTokio | Approach::PumpTokioBroadcast => {
            pump_tokio(workload, approach.strategy())
        }
        Approach::PumpSmol => pump_smol(workload),
        Approach::PumpCompletions => pump_completions(workload, Turns::Interval, Backend::Tokio),
        Approach::PumpReadiness => pump_completions(workload, Turns::Readiness, Backend::Tokio),
        Approach::PumpReadinessSmol => readiness_smol(workload),
        Approach::PumpReadinessThread => {
            pump_completions(workload, Turns::Readiness, Backend::Thread)
        }
        Approach::PumpReadinessTokioReactor => {
            pump_completions(workload, Turns::TokioReadiness, Backend::Tokio)
        }
        Approach::PumpHinted => pump_completions(workload, Turns::Deadlines, Backend::Tokio),
        Approach::SimpleRegistry => simple_registry(workload, Ticks::Tokio),
        Approach::SimpleRegistryAsyncIo => simple_registry(workload, Ticks::AsyncIo),
        Approach::PumpTokioTurned => pump_tokio_turned(workload),
    }
}

/// Spawns one tokio task per id awaiting `wait(id)`, on a fresh 2-worker runtime.
fn on_tokio<W, F>(workload: &Workload, wait: W) -> Seen
where
    W: Fn(u32) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    on_tokio_beside(workload, std::future::pending(), wait)
}

/// [`on_tokio`] with `background` running as a task of the same runtime until every id was seen.
fn on_tokio_beside<W, F>(
    workload: &Workload,
    background: impl Future<Output = ()> + Send + 'static,
    wait: W,
) -> Seen
where
    W: Fn(u32) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let rt = tokio_runtime();
    rt.block_on(async {
        let background = tokio::spawn(background);
        let seen = Collector::new(workload.n);
        for id in 0..workload.n {
            let (wait, seen) = (wait(id), seen.clone());
            tokio::spawn(async move {
                seen.start();
                Timed(std::pin::pin!(wait)).await;
                seen.record(id);
            });
        }
        seen.all_started().await;
        workload.arm();
        let seen = seen.all().await;
        background.abort();
        seen
    })
}

/// Peer 1: runs the loop in every poll.
struct Naive {
    fx: Arc<FakeLoop>,
    id: u32,
}

impl Naive {
    fn new(fx: Arc<FakeLoop>, id: u32) -> Self {
        Naive { fx, id }
    }
}

impl Future for Naive {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let _ = self.fx.run_once();
        if self.fx.check(self.id) {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

thread_local! {
    static ALREADY_RAN: Cell<bool> = const { Cell::new(false) };
}

/// Peer 2: runs the loop unless this thread's flag says it already ran.
struct ThreadLocal {
    fx: Arc<FakeLoop>,
    id: u32,
}

impl ThreadLocal {
    fn new(fx: Arc<FakeLoop>, id: u32) -> Self {
        ThreadLocal { fx, id }
    }
}

impl Future for ThreadLocal {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !ALREADY_RAN.get() {
            let _ = self.fx.run_once();
            ALREADY_RAN.set(true);
        }
        if self.fx.check(self.id) {
            return Poll::Ready(());
        }
        ALREADY_RAN.set(false);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Peer 3: runs the loop only when no other poll is inside.
struct Atomic {
    fx: Arc<FakeLoop>,
    active: Arc<AtomicUsize>,
    id: u32,
}

impl Atomic {
    fn new(fx: Arc<FakeLoop>, active: Arc<AtomicUsize>, id: u32) -> Self {
        Atomic { fx, active, id }
    }
}

impl Future for Atomic {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.active.fetch_add(1, Ordering::SeqCst) == 0 {
            let _ = self.fx.run_once();
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        if self.fx.check(self.id) {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Peer 4: a background task runs the loop and notifies everyone every `interval`.
fn background(workload: &Workload, interval: Duration) -> Seen {
    let fx = &workload.fx;
    let notify = Arc::new(Notify::new());
    let ticker = background_loop(fx.clone(), notify.clone(), interval);
    on_tokio_beside(workload, ticker, |id| {
        let (fx, notify) = (fx.clone(), notify.clone());
        async move {
            loop {
                let notified = notify.notified();
                tokio::pin!(notified);
                // Registered before the check, so a notification between the two is kept.
                notified.as_mut().enable();
                if fx.check(id) {
                    break;
                }
                notified.await;
            }
        }
    })
}

async fn background_loop(fx: Arc<FakeLoop>, notify: Arc<Notify>, interval: Duration) {
    loop {
        let _ = fx.run_once();
        notify.notify_waiters();
        tokio::time::sleep(interval).await;
    }
}

/// What [`SimpleRegistry`] asks of the C side: one run, and whether an id is done.
pub trait SimpleLoop: Send + Sync + 'static {
    /// Runs the loop once.
    fn run_once(&self);
    /// Whether `id` is done.
    fn check(&self, id: u32) -> bool;
}

impl SimpleLoop for FakeLoop {
    fn run_once(&self) {
        let _ = FakeLoop::run_once(self);
    }

    fn check(&self, id: u32) -> bool {
        FakeLoop::check(self, id)
    }
}

/// [`Approach::SimpleRegistry`]: pending waits by key, their ids and wakers, under the mutex
/// that also guards the loop (also what criterion's `turn` bench measures it by).
pub struct SimpleRegistry<L = FakeLoop> {
    fx: Arc<L>,
    /// The loop lock of [`Approach::SimpleRegistryAsyncIo`]: a round that finds it held skips.
    turn: async_lock::Mutex<()>,
    waits: std::sync::Mutex<HashMap<u64, (u32, Waker)>>,
    next_key: std::sync::atomic::AtomicU64,
}

impl<L> std::fmt::Debug for SimpleRegistry<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleRegistry").finish_non_exhaustive()
    }
}

impl<L: SimpleLoop> SimpleRegistry<L> {
    /// An empty registry around `fx`.
    pub fn new(fx: Arc<L>) -> Self {
        SimpleRegistry {
            fx,
            turn: async_lock::Mutex::new(()),
            waits: std::sync::Mutex::new(HashMap::new()),
            next_key: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn waits(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (u32, Waker)>> {
        self.waits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A wait for `id`.
    pub fn wait(self: &Arc<Self>, id: u32) -> SimpleWait<L> {
        SimpleWait {
            registry: self.clone(),
            id,
            key: None,
        }
    }

    /// One round: the loop, then every check, under the one mutex; the finished waits are woken
    /// after it (`woken` is the buffer for their wakers, empty on return).
    pub fn round(&self, woken: &mut Vec<Waker>) {
        {
            let mut waits = self.waits();
            self.fx.run_once();
            let fx = &self.fx;
            woken.extend(
                waits
                    .extract_if(|_, (id, _)| fx.check(*id))
                    .map(|(_, (_, waker))| waker),
            );
        }
        for waker in woken.drain(..) {
            waker.wake();
        }
    }
}

/// What turns the simple registry's rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ticks {
    /// tokio's interval, the round run as is ([`Approach::SimpleRegistry`]).
    Tokio,
    /// async-io's `Timer`, the round under the async loop lock ([`Approach::SimpleRegistryAsyncIo`]).
    AsyncIo,
}

/// A round every [`INTERVAL`], on the cadence the pump keeps (a late round is made up at once,
/// as the pump's timer does), so both make as many runs.
async fn simple_loop(registry: Arc<SimpleRegistry>, ticks: Ticks) {
    use futures_lite::StreamExt;
    let mut woken = Vec::new();
    match ticks {
        Ticks::Tokio => {
            let mut ticks = tokio::time::interval(INTERVAL);
            loop {
                ticks.tick().await;
                registry.round(&mut woken);
            }
        }
        Ticks::AsyncIo => {
            let mut ticks = async_io::Timer::interval(INTERVAL);
            while ticks.next().await.is_some() {
                if let Some(_turn) = registry.turn.try_lock() {
                    registry.round(&mut woken);
                }
            }
        }
    }
}

/// A wait of [`Approach::SimpleRegistry`]: checks once under the mutex, then registers; done
/// once its key was extracted.
pub struct SimpleWait<L: SimpleLoop = FakeLoop> {
    registry: Arc<SimpleRegistry<L>>,
    id: u32,
    key: Option<u64>,
}

impl<L: SimpleLoop> std::fmt::Debug for SimpleWait<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleWait")
            .field("id", &self.id)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl<L: SimpleLoop> Future for SimpleWait<L> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let registry = self.registry.clone();
        let mut waits = registry.waits();
        match self.key {
            None if registry.fx.check(self.id) => Poll::Ready(()),
            None => {
                let key = registry.next_key.fetch_add(1, Ordering::Relaxed);
                waits.insert(key, (self.id, cx.waker().clone()));
                self.key = Some(key);
                Poll::Pending
            }
            Some(key) => match waits.get_mut(&key) {
                None => {
                    self.key = None;
                    Poll::Ready(())
                }
                Some((_, waker)) => {
                    if !waker.will_wake(cx.waker()) {
                        *waker = cx.waker().clone();
                    }
                    Poll::Pending
                }
            },
        }
    }
}

impl<L: SimpleLoop> Drop for SimpleWait<L> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.registry.waits().remove(&key);
        }
    }
}

/// [`Approach::SimpleRegistry`] (or its async-io form) on a 2-worker tokio runtime.
fn simple_registry(workload: &Workload, ticks: Ticks) -> Seen {
    let registry = Arc::new(SimpleRegistry::new(workload.fx.clone()));
    on_tokio_beside(workload, simple_loop(registry.clone(), ticks), |id| {
        registry.wait(id)
    })
}

/// The thread of [`Approach::ReadinessThread`]: runs the loop whenever the fixture's descriptor
/// is readable, until `stop`.
fn readiness_looper(
    fx: Arc<FakeLoop>,
    notifies: Arc<Vec<Notify>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let fd = fx.ready_fd().expect("the fixture's descriptor");
        let fd = fd.try_clone_to_owned().expect("a duplicate descriptor");
        let ready = async_io::Async::new_nonblocking(fd).expect("registered with async-io");
        let mut finished = Vec::new();
        async_io::block_on(async {
            while !stop.load(Ordering::SeqCst) {
                // The timeout only lets the thread notice `stop`.
                let readable =
                    futures_lite::FutureExt::or(async { ready.readable().await.is_ok() }, async {
                        async_io::Timer::after(Duration::from_millis(10)).await;
                        false
                    })
                    .await;
                if !readable {
                    continue;
                }
                let _ = fx.run_once();
                fx.take_ready(&mut finished);
                for id in finished.drain(..) {
                    // Stores a permit if the waiter is not waiting yet: nothing is lost.
                    notifies[id as usize].notify_one();
                }
            }
        });
    })
}

/// The readiness baseline: see [`Approach::ReadinessThread`].
fn readiness_thread(workload: &Workload) -> Seen {
    let fx = &workload.fx;
    let notifies: Arc<Vec<Notify>> = Arc::new((0..workload.n).map(|_| Notify::new()).collect());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let looper = readiness_looper(fx.clone(), notifies.clone(), stop.clone());
    let rt = tokio_runtime();
    let seen = rt.block_on(async {
        let seen = Collector::new(workload.n);
        for id in 0..workload.n {
            let (notifies, seen) = (notifies.clone(), seen.clone());
            tokio::spawn(async move {
                seen.start();
                notifies[id as usize].notified().await;
                seen.record(id);
            });
        }
        seen.all_started().await;
        workload.arm();
        seen.all().await
    });
    stop.store(true, Ordering::SeqCst);
    looper.join().expect("the loop thread ends");
    seen
}

fn pump_for(fx: &Arc<FakeLoop>, strategy: Strategy) -> Pump {
    let fx = fx.clone();
    Pump::builder()
        .interval(INTERVAL)
        .strategy(strategy)
        .build(move || {
            let _ = fx.run_once();
        })
        .expect("valid settings")
}

/// Peer 5 on tokio: the pump and the waits on the same 2-worker runtime.
fn pump_tokio(workload: &Workload, strategy: Strategy) -> Seen {
    let fx = &workload.fx;
    let rt = tokio_runtime();
    rt.block_on(async {
        let pump = pump_for(fx, strategy);
        pump.spawn_on(Backend::Tokio).expect("inside the runtime");
        let seen = Collector::new(workload.n);
        for id in 0..workload.n {
            let (pump, fx, seen) = (pump.clone(), fx.clone(), seen.clone());
            tokio::spawn(async move {
                seen.start();
                Timed(pump.wait_until(move || fx.check(id)))
                    .await
                    .expect("wait completes");
                seen.record(id);
            });
        }
        seen.all_started().await;
        workload.arm();
        let seen = seen.all().await;
        close_counting(&pump);
        seen
    })
}

/// [`Approach::PumpTokioTurned`].
fn pump_tokio_turned(workload: &Workload) -> Seen {
    let fx = &workload.fx;
    let run_fx = fx.clone();
    let pump = Pump::builder()
        .interval(Duration::from_secs(3600))
        .build(move || {
            let _ = run_fx.run_once();
        })
        .expect("valid settings");
    let driver = pump.run();
    let turner = {
        let pump = pump.clone();
        async move {
            let mut ticks = tokio::time::interval(INTERVAL);
            loop {
                ticks.tick().await;
                if pump.turn().await.is_err() {
                    return;
                }
            }
        }
    };
    let background = async move {
        futures_lite::future::zip(driver, turner).await;
    };
    let seen = on_tokio_beside(workload, background, |id| {
        let (pump, fx) = (pump.clone(), fx.clone());
        async move {
            pump.wait_until(move || fx.check(id))
                .await
                .expect("wait completes");
        }
    });
    close_counting(&pump);
    seen
}

/// What turns a completion-driven pump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turns {
    /// The 1 ms interval.
    Interval,
    /// The fixture's ready descriptor; the timer, at 1 s, is only a fallback.
    Readiness,
    /// The same, watched with tokio's reactor (`tokio_readiness(true)`).
    TokioReadiness,
    /// The fixture's next deadline, reported by `run_once`.
    Deadlines,
}

/// Peer 5, completion-driven: `run_once` completes the ids the fixture reports ready, and each
/// waiter waits for its key; the pump is spawned on `backend`.
fn pump_completions(workload: &Workload, turns: Turns, backend: Backend) -> Seen {
    let rt = tokio_runtime();
    rt.block_on(async {
        let table = Completions::<u32, ()>::new();
        let mut run_once = completing(workload.fx.clone(), table.clone());
        let builder = Pump::builder();
        let pump = match turns {
            Turns::Interval => builder.interval(INTERVAL).build(move || {
                run_once();
            }),
            Turns::Readiness | Turns::TokioReadiness => {
                readiness_builder(&workload.fx, turns == Turns::TokioReadiness).build(move || {
                    run_once();
                })
            }
            Turns::Deadlines => builder.build(run_once),
        }
        .expect("valid settings");
        pump.spawn_on(backend)
            .expect("tokio inside its runtime, or a thread");
        let seen = Collector::new(workload.n);
        for id in 0..workload.n {
            let (pump, table, seen) = (pump.clone(), table.clone(), seen.clone());
            tokio::spawn(async move {
                seen.start();
                pump.wait_key(&table, id).await.expect("key wait completes");
                seen.record(id);
            });
        }
        seen.all_started().await;
        workload.arm();
        if turns == Turns::Deadlines {
            // New work: the pump hears the new deadlines from the run this kick causes.
            pump.kick();
        }
        let seen = seen.all().await;
        close_counting(&pump);
        seen
    })
}

/// The completion-driven run-once of the fixture: runs the loop, completes the ids it made
/// ready, and returns its next deadline.
fn completing(fx: Arc<FakeLoop>, table: Completions<u32, ()>) -> impl FnMut() -> Option<Instant> {
    let mut finished = Vec::new();
    move || {
        let _ = fx.run_once();
        fx.take_ready(&mut finished);
        for id in finished.drain(..) {
            table.complete(id, ());
        }
        fx.next_deadline_ns()
            .map(|at| Instant::now() + Duration::from_nanos(at.saturating_sub(now_ns())))
    }
}

/// A pump builder turned by the fixture's ready descriptor, the timer at 1 s as a mere fallback;
/// `tokio_reactor`: watched with tokio's reactor where the pump runs on tokio.
fn readiness_builder(fx: &FakeLoop, tokio_reactor: bool) -> Builder {
    Pump::builder()
        .interval(Duration::from_secs(1))
        .run_on_readable(fx.ready_fd().expect("the fixture's descriptor"))
        .tokio_readiness(tokio_reactor)
}

/// [`Approach::PumpReadinessSmol`].
fn readiness_smol(workload: &Workload) -> Seen {
    let table = Completions::<u32, ()>::new();
    let mut run_once = completing(workload.fx.clone(), table.clone());
    let pump = readiness_builder(&workload.fx, false)
        .build(move || {
            run_once();
        })
        .expect("valid settings");
    on_smol(workload, &pump, |id| {
        let (pump, table) = (pump.clone(), table.clone());
        async move {
            pump.wait_key(&table, id).await.expect("key wait completes");
        }
    })
}

/// An `async-executor` (smol's executor) run by [`WORKERS`] threads until the returned sender
/// is dropped.
fn smol_executor() -> (Arc<Executor<'static>>, async_channel::Sender<()>) {
    let executor = Arc::new(Executor::new());
    let (stop, stopped) = async_channel::bounded::<()>(1);
    for _ in 0..WORKERS {
        let (executor, stopped) = (executor.clone(), stopped.clone());
        std::thread::spawn(move || async_io::block_on(executor.run(stopped.recv())));
    }
    (executor, stop)
}

/// Peer 5 on smol: the pump and the waits on a 2-thread smol executor.
fn pump_smol(workload: &Workload) -> Seen {
    let pump = pump_for(&workload.fx, Strategy::default());
    on_smol(workload, &pump, |id| {
        let (pump, fx) = (pump.clone(), workload.fx.clone());
        async move {
            pump.wait_until(move || fx.check(id))
                .await
                .expect("wait completes");
        }
    })
}

/// Runs `pump` and one task per id awaiting `wait(id)` on a fresh 2-thread smol executor, arms
/// the ids once every waiter waits, and closes the pump when all saw their id.
fn on_smol<W, F>(workload: &Workload, pump: &Pump, wait: W) -> Seen
where
    W: Fn(u32) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let (executor, _stop) = smol_executor();
    executor.spawn(pump.run()).detach();
    let seen = Collector::new(workload.n);
    for id in 0..workload.n {
        let (wait, seen) = (wait(id), seen.clone());
        executor
            .spawn(async move {
                seen.start();
                wait.await;
                seen.record(id);
            })
            .detach();
    }
    seen.all_started_blocking();
    workload.arm();
    let seen = seen.all_blocking();
    close_counting(pump);
    seen
}

/// Runs `approach` with no waiter at all for `span`; returns the loop calls made meanwhile.
pub fn idle(approach: Approach, span: Duration) -> u64 {
    let fx = Arc::new(FakeLoop::new(1));
    let sleep = async_io::Timer::after(span);
    match approach {
        // Poll-driven peers do nothing without a future to poll.
        Approach::Naive | Approach::ThreadLocal | Approach::Atomic => {
            tokio_runtime().block_on(sleep);
        }
        Approach::SimpleRegistry | Approach::SimpleRegistryAsyncIo => {
            let ticks = match approach {
                Approach::SimpleRegistry => Ticks::Tokio,
                _ => Ticks::AsyncIo,
            };
            tokio_runtime().block_on(async {
                let registry = Arc::new(SimpleRegistry::new(fx.clone()));
                let ticker = tokio::spawn(simple_loop(registry, ticks));
                sleep.await;
                ticker.abort();
            });
        }
        Approach::Background1ms | Approach::Background10ms => {
            let interval = if approach == Approach::Background1ms {
                INTERVAL
            } else {
                Duration::from_millis(10)
            };
            tokio_runtime().block_on(async {
                let ticker = tokio::spawn(background_loop(
                    fx.clone(),
                    Arc::new(Notify::new()),
                    interval,
                ));
                sleep.await;
                ticker.abort();
            });
        }
        Approach::ReadinessThread => {
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let looper = readiness_looper(fx.clone(), Arc::new(Vec::new()), stop.clone());
            async_io::block_on(sleep);
            stop.store(true, Ordering::SeqCst);
            looper.join().expect("the loop thread ends");
        }
        Approach::PumpTokio
        | Approach::PumpTokioBroadcast
        | Approach::PumpTokioTurned
        | Approach::PumpCompletions
        | Approach::PumpReadiness
        | Approach::PumpReadinessTokioReactor
        | Approach::PumpHinted => {
            tokio_runtime().block_on(async {
                let pump = idle_pump(approach, &fx);
                pump.spawn_on(Backend::Tokio).expect("inside the runtime");
                sleep.await;
                pump.close();
            });
        }
        Approach::PumpReadinessThread => {
            let pump = idle_pump(approach, &fx);
            pump.spawn_on(Backend::Thread)
                .expect("a thread can be spawned");
            async_io::block_on(sleep);
            pump.close();
        }
        Approach::PumpSmol | Approach::PumpReadinessSmol => {
            let (executor, _stop) = smol_executor();
            let pump = idle_pump(approach, &fx);
            executor.spawn(pump.run()).detach();
            async_io::block_on(sleep);
            pump.close();
        }
    }
    fx.stats().calls
}

/// An ffi-pump approach's pump, configured as in its measured cells (trigger, deadline hint),
/// for [`idle`].
fn idle_pump(approach: Approach, fx: &Arc<FakeLoop>) -> Pump {
    let mut run_once = completing(fx.clone(), Completions::<u32, ()>::new());
    match approach {
        Approach::PumpReadiness
        | Approach::PumpReadinessSmol
        | Approach::PumpReadinessThread
        | Approach::PumpReadinessTokioReactor => {
            readiness_builder(fx, approach == Approach::PumpReadinessTokioReactor).build(
                move || {
                    run_once();
                },
            )
        }
        Approach::PumpHinted => Pump::builder().build(run_once),
        _ => return pump_for(fx, approach.strategy()),
    }
    .expect("valid settings")
}

type BoxedTask = Pin<Box<dyn Future<Output = u64> + Send>>;

/// Latency from `kick()` to a pending waiter seeing its id done, `rounds` times in a row, in ns.
///
/// # Panics
///
/// Panics for an approach that is not ffi-pump: only ffi-pump has `kick()`.
pub fn kick_latency(approach: Approach, rounds: u32) -> Vec<u64> {
    let fx = Arc::new(FakeLoop::new(rounds));
    fx.set_cost(crate::LOOP_COST);
    let pump = pump_for(&fx, approach.strategy());
    match approach {
        Approach::PumpTokio | Approach::PumpTokioBroadcast => tokio_runtime().block_on(async {
            pump.spawn_on(Backend::Tokio).expect("inside the runtime");
            let spawn = |task: BoxedTask| -> BoxedTask {
                let task = tokio::spawn(task);
                Box::pin(async move { task.await.expect("waiter task") })
            };
            kick_rounds(&pump, &fx, rounds, spawn).await
        }),
        Approach::PumpSmol => {
            let (executor, _stop) = smol_executor();
            executor.spawn(pump.run()).detach();
            let spawn = |task: BoxedTask| -> BoxedTask { Box::pin(executor.spawn(task)) };
            async_io::block_on(kick_rounds(&pump, &fx, rounds, spawn))
        }
        other => panic!("{} has no kick()", other.name()),
    }
}

async fn kick_rounds(
    pump: &Pump,
    fx: &Arc<FakeLoop>,
    rounds: u32,
    spawn: impl Fn(BoxedTask) -> BoxedTask,
) -> Vec<u64> {
    let mut latencies = Vec::with_capacity(rounds as usize);
    for id in 0..rounds {
        let (waiter_pump, check) = (pump.clone(), fx.clone());
        let waiter = spawn(Box::pin(async move {
            waiter_pump
                .wait_until(move || check.check(id))
                .timeout(Duration::from_secs(10))
                .await
                .expect("kicked wait completes");
            now_ns()
        }));
        // The waiter is pending (counted by the pump) before its id is armed and kicked.
        let started = Instant::now();
        while pump.stats().pending_waits == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "waiter never pending"
            );
            futures_lite::future::yield_now().await;
        }
        fx.arm_at(id, now_ns());
        let kicked = now_ns();
        pump.kick();
        // A timer tick between arming and the kick can beat it: 0, not a negative latency.
        latencies.push(waiter.await.saturating_sub(kicked));
    }
    pump.close();
    latencies
}
