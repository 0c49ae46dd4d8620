//! What wakes a pump for its loop's set on Windows, where the set has no descriptor a reactor can
//! watch: the loop's own thread sleeps on the set's completion port, and the driver on that thread
//! finds there what the sleep found ready.

use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::kernel::Port;
use super::Descriptors;

/// The readiness of a loop's set, for the driver on the loop's thread.
pub(crate) struct Trigger {
    port: Arc<Port>,
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trigger").finish_non_exhaustive()
    }
}

impl Trigger {
    pub(crate) fn of(set: &Descriptors) -> Trigger {
        Trigger { port: set.port() }
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
        poll_fn(|cx| self.trigger.port.poll_found(cx)).await;
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
        // A wake after this look notifies the port, and the sleep returns at once.
        if !unpark.woken.load(Ordering::SeqCst) {
            port.sleep();
        }
    }
}
