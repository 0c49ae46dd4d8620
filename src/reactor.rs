//! What the pump takes from async-io: timers, descriptor readiness and `block_on`.
//!
//! async-io does not build under `--cfg loom` (its reactor parks with a timeout, which loom cannot
//! model), so the loom models (`tests/loom.rs`) get a stand-in whose timers never fire and which
//! has no descriptors: they turn the pump with `kick()` and `turn()`, never by time. This module
//! is that seam; everything else in the crate is the same code in both builds.

#[cfg(all(unix, not(loom)))]
pub(crate) use async_io::Async;
#[cfg(not(loom))]
pub(crate) use async_io::{block_on, Timer};

#[cfg(loom)]
pub(crate) use stand_in::{block_on, Async, Timer};

#[cfg(loom)]
mod stand_in {
    use std::future::Future;
    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::{Duration, Instant};

    pub(crate) use futures_lite::future::block_on;

    /// A timer that never fires.
    #[derive(Debug)]
    pub(crate) struct Timer;

    impl Timer {
        pub(crate) fn never() -> Timer {
            Timer
        }

        pub(crate) fn at(_: Instant) -> Timer {
            Timer
        }

        pub(crate) fn set_at(&mut self, _: Instant) {}

        pub(crate) fn set_interval(&mut self, _: Duration) {}
    }

    impl Future for Timer {
        type Output = Instant;

        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Instant> {
            Poll::Pending
        }
    }

    impl futures_lite::Stream for Timer {
        type Item = Instant;

        fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Instant>> {
            Poll::Pending
        }
    }

    /// No descriptor can be watched: registering one fails.
    #[derive(Debug)]
    pub(crate) struct Async<T>(T);

    impl<T> Async<T> {
        pub(crate) fn new_nonblocking(_: T) -> io::Result<Async<T>> {
            Err(io::ErrorKind::Unsupported.into())
        }

        pub(crate) async fn readable(&self) -> io::Result<()> {
            std::future::pending().await
        }

        pub(crate) fn get_ref(&self) -> &T {
            &self.0
        }
    }
}

/// Whether async-io's reactor is up, or comes up now: it panics on its first use in a process
/// with no descriptor free, and every pump's timer stands on it. A timer polled once brings it
/// up and goes again; once it did, this is one load.
#[cfg(not(loom))]
pub(crate) fn available() -> Result<(), crate::Error> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static UP: AtomicBool = AtomicBool::new(false);
    if UP.load(Ordering::Acquire) {
        return Ok(());
    }
    // async-io's first use starts its helper thread before it makes its poller: with no
    // descriptor free both panic, and async-io never starts that thread again — a runtime that
    // does not drive its reactor (tokio) would then never fire a timer. So the descriptors it
    // needs are asked for first, with a poller that goes at once (another thread may still take
    // them in between: the narrow case left; and a program that brought async-io up itself and
    // is out of descriptors now is refused too, as documented on the error).
    drop(polling::Poller::new().map_err(|_| crate::Error::ReactorUnavailable)?);
    let up = std::panic::catch_unwind(|| {
        let mut probe = Timer::after(std::time::Duration::from_secs(3600));
        futures_lite::future::block_on(futures_lite::future::poll_once(&mut probe))
    });
    match up {
        Ok(_) => {
            UP.store(true, Ordering::Release);
            Ok(())
        }
        Err(payload) => {
            crate::unwind::forget_payload(payload);
            Err(crate::Error::ReactorUnavailable)
        }
    }
}

/// The stand-ins have no reactor to bring up.
#[cfg(loom)]
pub(crate) fn available() -> Result<(), crate::Error> {
    Ok(())
}
