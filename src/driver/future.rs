//! [`Driver`]: the pump future, for any executor.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::{activate, drive, DriverCount};
use crate::core::Core;

/// The pump future: ticks the timer and runs the loop until the pump closes.
///
/// Returned by [`Pump::run`](crate::Pump::run) for spawning on an executor of your choice;
/// [`Pump::spawn`](crate::Pump::spawn) does that for you. It is `Send + 'static` and resolves once
/// the pump is closed.
///
/// Only one `Driver` drives a pump at a time. Others stand by and take over if the active one is
/// dropped; when the last `Driver` is dropped before the pump closes (its task was cancelled or its
/// runtime shut down), the pump closes, so pending waits end with
/// [`Error::Closed`](crate::Error::Closed) instead of hanging.
///
/// # Panics
///
/// Panics if polled again after it completed, like most futures. A panic of `run_once` or of
/// a check does not reach it: the pump catches it (and, for `run_once`, fails with
/// [`Error::Panicked`](crate::Error::Panicked)).
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
pub struct Driver {
    inner: Pin<Box<dyn Future<Output = ()> + Send>>,
    _count: DriverCount,
}

impl Driver {
    pub(crate) fn new(core: Arc<Core>) -> Driver {
        let count = DriverCount::new(core.clone());
        Driver {
            inner: Box::pin(async move {
                if let Some(_active) = activate(&core).await {
                    drive(&core, None::<fn(super::Cause) -> Option<crate::Next>>, None).await;
                }
            }),
            _count: count,
        }
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.inner.as_mut().poll(cx)
    }
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}
