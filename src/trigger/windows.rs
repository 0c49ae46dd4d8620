//! What wakes a pump for a descriptor set on Windows, where the set has no descriptor a reactor
//! can watch: a loop's own thread sleeps on the set's completion port, and the driver on that
//! thread finds there what the sleep found ready; for a set given to
//! [`run_on_readable`](crate::Builder::run_on_readable), a thread of the pump's sleeps on the port
//! and wakes the driver wherever it runs.

use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use super::kernel::Port;
use super::Descriptors;
use crate::Error;

/// The readiness of a set, for the pump's driver.
pub(crate) struct Trigger {
    port: Arc<Port>,
    /// Tells this trigger's driver's waker from the others' on a shared port.
    id: u64,
    /// The thread that sleeps on the port (a set given to `run_on_readable`); none for a loop's
    /// own set, whose thread sleeps there itself ([`block_on`]).
    _sleeper: Option<Sleeper>,
}

/// The thread of a `run_on_readable` set, stopped and joined when the pump drops its trigger.
struct Sleeper {
    stop: Arc<AtomicBool>,
    port: Arc<Port>,
    thread: Option<JoinHandle<()>>,
    /// Disconnected as the thread ends (in a mutex only to be `Sync`).
    ended: Mutex<mpsc::Receiver<()>>,
}

/// How long the drop of a pump waits for its port thread to end before it leaves it behind.
const SLEEPER_GRACE: Duration = Duration::from_secs(1);

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // It sleeps on the port or waits for a run to take reports: both end now.
        self.port.wake_to_stop();
        // Joined once it ended — but not waited for beyond a grace: `polling`'s IOCP backend
        // can deadlock in the port's wait on the local close of a socket still watched (see
        // `Descriptors`), and a pump's drop must not hang for it. Left behind, the thread holds
        // the port (which it leaks, and whose wait it keeps: the set reports nothing more) and
        // no part of the pump.
        let ended = self.ended.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Err(mpsc::RecvTimeoutError::Disconnected) = ended.recv_timeout(SLEEPER_GRACE) {
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

/// What [`run_on_readable`](crate::Builder::run_on_readable) keeps on Windows: the set.
#[derive(Debug, Clone)]
pub(crate) struct TriggerSet(Descriptors);

impl TriggerSet {
    pub(crate) fn new(set: &Descriptors) -> TriggerSet {
        TriggerSet(set.clone())
    }

    /// A trigger for one pump, with its thread sleeping on the set's port. (`tokio`: no
    /// reactor can watch a port, so there is nothing to hand tokio.)
    pub(crate) fn register(&self, _tokio: bool) -> Result<Trigger, Error> {
        let port = self.0.port();
        let stop = Arc::new(AtomicBool::new(false));
        let (sleeps, stopped) = (port.clone(), stop.clone());
        let (ending, ended) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("ffi-pump-set".into())
            .spawn(move || {
                let _ending = ending;
                sleeps.sleep_while(&stopped);
            })
            .map_err(|err| Error::Trigger(err.kind()))?;
        Ok(Trigger {
            port: port.clone(),
            id: next_id(),
            _sleeper: Some(Sleeper {
                stop,
                port: port.clone(),
                thread: Some(thread),
                ended: Mutex::new(ended),
            }),
        })
    }
}

/// A trigger's id, never used before in this process.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Drop for Trigger {
    fn drop(&mut self) {
        self.port.forget_waker(self.id);
    }
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trigger").finish_non_exhaustive()
    }
}

impl Trigger {
    pub(crate) fn of(set: &Descriptors) -> Trigger {
        Trigger {
            port: set.port(),
            id: next_id(),
            _sleeper: None,
        }
    }

    /// The driver's wait for readiness.
    pub(crate) fn watch(&self) -> Result<Watch<'_>, io::ErrorKind> {
        Ok(Watch { trigger: self })
    }

    /// Whether the last sleep found registrations ready that no run took yet.
    pub(crate) fn is_readable_now(&self) -> bool {
        self.port.has_found()
    }

    /// The set is the pump's own: nobody else closes it.
    pub(crate) fn is_open(&self) -> Result<(), io::ErrorKind> {
        Ok(())
    }
}

/// The active driver's wait for readiness (see [`Trigger::watch`]).
#[derive(Debug)]
pub(crate) struct Watch<'a> {
    trigger: &'a Trigger,
}

impl Watch<'_> {
    /// The trigger watched.
    pub(crate) fn trigger(&self) -> &Trigger {
        self.trigger
    }

    /// Waits until a sleep on the port found registrations ready.
    pub(crate) async fn readable(&self) -> Result<(), io::ErrorKind> {
        let trigger = self.trigger;
        poll_fn(|cx| trigger.port.poll_found(trigger.id, cx)).await;
        Ok(())
    }
}

/// Wakes the loop's thread out of its sleep on the port.
struct Unpark {
    woken: AtomicBool,
    port: Arc<Port>,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.woken.swap(true, Ordering::SeqCst) {
            self.port.notify();
        }
    }
}

/// Polls `driver` on this thread to its end, sleeping on the set's port in between: a readiness
/// ends the sleep itself, a kick or a timer through the waker's notification.
pub(crate) fn block_on<T>(set: &Descriptors, driver: impl Future<Output = T>) -> T {
    let port = set.port();
    let unpark = Arc::new(Unpark {
        woken: AtomicBool::new(false),
        port: port.clone(),
    });
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut driver = pin!(driver);
    loop {
        unpark.woken.store(false, Ordering::SeqCst);
        if let Poll::Ready(done) = driver.as_mut().poll(&mut cx) {
            return done;
        }
        // A wake after the poll set the flag, and the sleep returns at once.
        port.sleep_unless(&unpark.woken);
    }
}
