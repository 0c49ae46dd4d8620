use std::fmt;
use std::io;
use std::sync::Arc;

use crate::Backend;

/// Why a pump operation did not succeed.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Error, Pump};
/// use std::time::Duration;
///
/// # futures_lite::future::block_on(async {
/// let pump = Pump::new(|| {});
/// pump.spawn();
/// let never = pump.wait_until(|| false).timeout(Duration::from_millis(10)).await;
/// assert_eq!(never, Err(Error::TimedOut));
///
/// // It converts into `std::io::Error` for code that speaks `io::Result`.
/// let io: std::io::Error = Error::TimedOut.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The wait's `.timeout(..)` elapsed before its condition held.
    TimedOut,
    /// The pump was closed: [`Pump::close`](crate::Pump::close) was called, the last
    /// [`Pump`](crate::Pump) handle was dropped, or the task driving it was dropped.
    Closed,
    /// `run_once` panicked: the pump is poisoned and stopped. From
    /// [`Builder::build_with_state`](crate::Builder::build_with_state): its factory panicked, and
    /// no pump was made. (A panic in the `Drop` of the loop's state, or of what `run_once`
    /// captured, comes after the pump closed: its waits end with [`Error::Closed`], and
    /// [`Stats::panicked`](crate::Stats) says so.)
    Panicked,
    /// Nothing drives the pump: neither [`Pump::spawn`](crate::Pump::spawn) nor
    /// [`Pump::run`](crate::Pump::run) was called, so a wait would never finish. Told to every
    /// new wait at its first poll, before its check or its table is looked at, so the mistake
    /// shows at once, not only for waits whose answer is not there yet.
    NotRunning,
    /// Called from inside the pump (from `run_once` or from a wait's check) on the same thread,
    /// where waiting for the loop could only deadlock.
    Reentrant,
    /// [`Pump::wait_key`](crate::Pump::wait_key) on a key that another wait is already waiting
    /// for: a completed value goes to one wait only.
    KeyInUse,
    /// The builder was given a setting it cannot use; the text says which.
    InvalidConfig(&'static str),
    /// The requested backend is not compiled in, or has no runtime here (tokio outside a runtime).
    BackendUnavailable(Backend),
    /// The operating system refused to start the pump's thread.
    ThreadSpawn(io::ErrorKind),
    /// The readiness trigger ([`Builder::run_on_readable`](crate::Builder::run_on_readable))
    /// could not be set up, or waiting on it failed; the pump is stopped.
    Trigger(io::ErrorKind),
    /// async-io's reactor, which runs the pump's timers, could not start: its first use in this
    /// process found no descriptor free (async-io panics then, and its helper thread with it
    /// for good; the pump says so instead, asking for the descriptors the reactor needs before
    /// it first touches async-io — so a program that brought async-io up itself, out of
    /// descriptors as its first pump is driven, is refused too). A spawn refused for it leaves
    /// the pump as it was; try again once descriptors are free. Once a pump found the reactor
    /// up, it is not asked again.
    ReactorUnavailable,
    /// The library dropped a request's [`Completer`](crate::Completer) without completing it
    /// ([`LoopHandle::request`](crate::LoopHandle::request)): no value will come.
    Unanswered,
    /// The factory of a loop on its own thread
    /// ([`Builder::build_with_state`](crate::Builder::build_with_state)) returned this error;
    /// no pump was made. [`source`](std::error::Error::source) is the factory's error, to
    /// downcast.
    Factory(Arc<dyn std::error::Error + Send + Sync + 'static>),
}

/// Two errors are equal if they are the same variant with equal contents; two factory errors
/// only if they are one and the same error (errors in general cannot be compared).
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        match (self, other) {
            (Error::Factory(a), Error::Factory(b)) => Arc::ptr_eq(a, b),
            (Error::InvalidConfig(a), Error::InvalidConfig(b)) => a == b,
            (Error::BackendUnavailable(a), Error::BackendUnavailable(b)) => a == b,
            (Error::ThreadSpawn(a), Error::ThreadSpawn(b))
            | (Error::Trigger(a), Error::Trigger(b)) => a == b,
            // Variants with contents were all matched above: equal discriminants here are two
            // of the same variant without contents.
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

impl Eq for Error {}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::TimedOut => f.write_str("timed out waiting for the C event loop"),
            Error::Closed => f.write_str("the pump is closed"),
            Error::Panicked => f.write_str(
                "the pump's run_once (or its loop's factory) panicked; the pump is poisoned",
            ),
            Error::NotRunning => f.write_str(
                "nothing drives the pump: call Pump::spawn() or spawn Pump::run() before waiting",
            ),
            Error::Reentrant => f.write_str(
                "called from inside the pump's run_once or a wait's check, where it would deadlock",
            ),
            Error::KeyInUse => f.write_str("another wait is already waiting for this key"),
            Error::InvalidConfig(why) => write!(f, "invalid pump configuration: {why}"),
            Error::BackendUnavailable(backend) => {
                write!(f, "backend {backend:?} is not available here")
            }
            Error::ThreadSpawn(kind) => write!(f, "could not start the pump thread: {kind}"),
            Error::Trigger(kind) => write!(f, "the pump's readiness trigger failed: {kind}"),
            Error::Factory(error) => write!(f, "the loop's factory failed: {error}"),
            Error::ReactorUnavailable => {
                f.write_str("async-io's reactor could not start (no descriptor free?)")
            }
            Error::Unanswered => {
                f.write_str("the C library dropped the request without completing it")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Factory(error) => Some(&**error),
            _ => None,
        }
    }
}

impl From<Error> for io::Error {
    fn from(err: Error) -> io::Error {
        let kind = match err {
            Error::TimedOut => io::ErrorKind::TimedOut,
            Error::Closed => io::ErrorKind::BrokenPipe,
            Error::NotRunning => io::ErrorKind::NotConnected,
            Error::Reentrant => io::ErrorKind::ResourceBusy,
            Error::KeyInUse => io::ErrorKind::AlreadyExists,
            Error::InvalidConfig(_) => io::ErrorKind::InvalidInput,
            Error::BackendUnavailable(_) => io::ErrorKind::Unsupported,
            Error::ThreadSpawn(kind) | Error::Trigger(kind) => kind,
            Error::Panicked => io::ErrorKind::Other,
            Error::Unanswered => io::ErrorKind::UnexpectedEof,
            Error::Factory(_) | Error::ReactorUnavailable => io::ErrorKind::Other,
        };
        io::Error::new(kind, err)
    }
}
