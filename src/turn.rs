//! [`Turn`]: the future of [`Pump::turn`](crate::Pump::turn).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::shared::Shared;
use crate::Error;

/// Future returned by [`Pump::turn`](crate::Pump::turn).
///
/// # Cancel safety
///
/// Dropping it leaves the pump as it was, or with a run requested as by [`Pump::kick`](crate::Pump::kick).
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
///
/// # futures_lite::future::block_on(async {
/// let pump = Pump::new(|| {});
/// pump.spawn();
/// let turn: ffi_pump::Turn = pump.turn();
/// turn.await?;
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Turn {
    inner: Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>,
}

impl Turn {
    pub(crate) fn new(shared: Arc<Shared>) -> Turn {
        Turn {
            inner: Box::pin(shared.turn()),
        }
    }
}

impl Future for Turn {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl fmt::Debug for Turn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Turn").finish_non_exhaustive()
    }
}
