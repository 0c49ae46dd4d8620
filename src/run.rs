//! The pump future ([`Run`]) and the timer loop behind it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::reactor::Timer;
use async_lock::MutexGuardArc;
use futures_lite::{FutureExt, StreamExt};

use crate::shared::Shared;
use crate::trace::Cause;
#[cfg(unix)]
use crate::trigger::{Trigger, Watch};

/// The pump future: ticks the timer and runs the loop until the pump closes.
///
/// Returned by [`Pump::run`](crate::Pump::run) for spawning on an executor of your choice;
/// [`Pump::spawn`](crate::Pump::spawn) does that for you. It is `Send + 'static` and resolves once
/// the pump is closed.
///
/// Only one `Run` drives a pump at a time. Others stand by and take over if the active one is
/// dropped; when the last `Run` is dropped before the pump closes (its task was cancelled or its
/// runtime shut down), the pump closes, so pending waits end with
/// [`Error::Closed`](crate::Error::Closed) instead of hanging.
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
///
/// # futures_lite::future::block_on(async {
/// let pump = Pump::new(|| {});
/// let task = smol::spawn(pump.run());
/// pump.turn().await?;
/// pump.close();
/// task.await; // the pump future ends once the pump is closed
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[must_use = "the pump does nothing unless this future is spawned or polled"]
pub struct Run {
    inner: Pin<Box<dyn Future<Output = ()> + Send>>,
    _driver: Driver,
}

impl Run {
    pub(crate) fn new(shared: Arc<Shared>) -> Run {
        let driver = Driver::new(shared.clone());
        Run {
            inner: Box::pin(async move {
                if let Some(_slot) = take_slot(&shared).await {
                    drive(&shared, None::<fn()>).await;
                }
            }),
            _driver: driver,
        }
    }
}

impl Future for Run {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.inner.as_mut().poll(cx)
    }
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run").finish_non_exhaustive()
    }
}

/// Counts one driver of the pump while it lives (a [`Run`] or the pump thread).
pub(crate) struct Driver {
    shared: Arc<Shared>,
}

impl Driver {
    pub(crate) fn new(shared: Arc<Shared>) -> Driver {
        shared.add_driver();
        Driver { shared }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.shared.remove_driver();
    }
}

/// Waits for the right to be the active driver; `None` once the pump is closed.
pub(crate) async fn take_slot(shared: &Shared) -> Option<MutexGuardArc<()>> {
    loop {
        if shared.is_closed() {
            return None;
        }
        if let Some(slot) = shared.driver_slot.try_lock_arc() {
            return Some(slot);
        }
        let woken = shared.wake.listen();
        if shared.is_closed() {
            return None;
        }
        let slot = async { Some(shared.driver_slot.lock_arc().await) }
            .or(async {
                woken.await;
                None
            })
            .await;
        if slot.is_some() {
            return slot;
        }
    }
}

/// What woke the active driver.
enum Wake {
    /// The interval or deadline timer, due at this instant.
    Tick(Instant),
    /// The readiness trigger's descriptor is readable.
    #[cfg(unix)]
    Ready,
    /// A kick, a new wait, a close: look again.
    Woken,
    /// Waiting for readiness failed.
    #[cfg(unix)]
    TriggerFailed(std::io::ErrorKind),
}

/// Readiness of the pump's trigger, if it has one; otherwise never.
#[cfg(unix)]
async fn readiness(watch: Option<&Watch<'_>>) -> Wake {
    let Some(watch) = watch else {
        return std::future::pending().await;
    };
    if watch.trigger().is_readable_now() {
        // Still readable after the last run (which yielded to the tasks it woke): run again.
        return Wake::Ready;
    }
    match watch.readable().await {
        Ok(()) => Wake::Ready,
        Err(kind) => Wake::TriggerFailed(kind),
    }
}

/// Without descriptors there is no readiness to wait for.
#[cfg(not(unix))]
async fn readiness(_: Option<&std::convert::Infallible>) -> Wake {
    std::future::pending().await
}

/// The active driver's loop: a turn per timer tick (or deadline), kick, or readiness; asleep
/// while nobody waits.
pub(crate) async fn drive<L: FnMut()>(shared: &Shared, mut local: Option<L>) {
    let interval = shared.config.interval;
    let hinted = shared.config.hinted;
    let mut timer = if hinted {
        Timer::never()
    } else {
        Timer::interval(interval)
    };
    // Made here, on the thread polling the driver, so a driver on tokio watches with tokio's
    // reactor.
    #[cfg(unix)]
    let watch = match shared.trigger.as_ref().map(Trigger::watch).transpose() {
        Ok(watch) => watch,
        Err(kind) => {
            shared.fail(crate::Error::Trigger(kind));
            return;
        }
    };
    #[cfg(not(unix))]
    let watch = None;
    loop {
        if shared.is_closed() {
            return;
        }
        if shared.kicked.swap(false, SeqCst) {
            tick(shared, &mut local, Cause::Kick).await;
            continue;
        }
        let woken = shared.wake.listen();
        if shared.is_closed() || shared.kicked.load(SeqCst) {
            continue;
        }
        if shared.is_idle() {
            shared.registry.sweep();
            woken.await;
            // The first wait after idle gets its run one interval from now, not a burst of
            // ticks the timer missed while asleep.
            if !hinted {
                timer.set_interval(interval);
            }
            continue;
        }
        if hinted {
            // Sleep exactly until the library says it has work; nothing due, no run.
            match shared.next_deadline() {
                Some(at) => timer.set_at(at),
                None => timer = Timer::never(),
            }
        }
        let wake = async { timer.next().await.map_or(Wake::Woken, Wake::Tick) }
            .or(async {
                woken.await;
                Wake::Woken
            })
            .or(readiness(watch.as_ref()))
            .await;
        match wake {
            // The last wait may have ended while the timer ran: an idle pump does not call the
            // loop.
            Wake::Tick(due) if !shared.is_idle() => {
                let cause = if hinted {
                    Cause::Deadline
                } else {
                    let late = due.elapsed();
                    if late > interval {
                        shared.count_late_tick(late);
                    }
                    Cause::Tick
                };
                tick(shared, &mut local, cause).await;
            }
            #[cfg(unix)]
            Wake::Ready => {
                tick(shared, &mut local, Cause::Readiness).await;
                #[cfg(unix)]
                if let Some(Err(kind)) = shared.trigger.as_ref().map(|t| t.is_open()) {
                    shared.fail(crate::Error::Trigger(kind));
                    return;
                }
            }
            #[cfg(unix)]
            Wake::TriggerFailed(kind) => {
                shared.fail(crate::Error::Trigger(kind));
                return;
            }
            Wake::Tick(_) | Wake::Woken => {}
        }
    }
}

/// One run for the driver, with the loop that lives on this thread if there is one.
///
/// Then hands the thread back to the executor once: a run slower than the interval leaves the
/// timer overdue (and a kick may be waiting already), so without this the driver would run the
/// loop again and again without ever returning `Pending`, and a one-thread executor would run
/// nothing else.
async fn tick<L: FnMut()>(shared: &Shared, local: &mut Option<L>, cause: Cause) {
    if let Some(guard) = shared.lock_for_tick().await {
        shared.run_locked(
            guard,
            local.as_mut().map(|run_once| run_once as &mut dyn FnMut()),
            cause,
        );
    }
    futures_lite::future::yield_now().await;
}
