//! [`LoopHandle::request`](crate::LoopHandle::request): work on the loop's thread whose one
//! result the library hands back through a [`Completer`], with keys the pump allocates.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::resume_unwind;
use std::pin::Pin;
use std::sync::Weak;
use std::task::{Context, Poll};

use crate::core::Core;
use crate::kept::{self, Forget};
use crate::unwind::DropCaught;
use crate::{Completions, Error, WaitKey};

/// Names one request ([`LoopHandle::request`](crate::LoopHandle::request)) among those of its
/// loop: the same id is in its [`Completer`] ([`Completer::id`]), so a binding can file the C
/// object it made under it (its cancel is handed what its `start` returned: return the id
/// there if the cancel needs it). Allocated by the pump, unique per loop.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Completer, Pump, RequestId};
/// use std::collections::HashMap;
///
/// # futures_lite::future::block_on(async {
/// // Stand-in for a thread-affine C library: it finishes what was started at its next run.
/// let (_pump, library) = Pump::builder().build_with_state(
///     |_| Ok(HashMap::<RequestId, Completer<&str>>::new()),
///     |started, _| {
///         for (_, done) in started.drain() {
///             done.complete("finished");
///         }
///         None
///     },
/// )?;
/// let request = library.request(
///     |started, done| {
///         let id = done.id(); // the C object is filed under it
///         started.insert(id, done);
///         id
///     },
///     |started, id: RequestId| drop(started.remove(&id)), // gave up: ffi::cancel(…)
/// );
/// assert_eq!(request.await?, "finished");
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub(crate) u64);

impl RequestId {
    /// The id as a number (for a C library's user data, say).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// # futures_lite::future::block_on(async {
    /// let (_pump, handle) = Pump::builder().build_with_state(|_| Ok(()), |_, _| None)?;
    /// let request = handle.request(
    ///     |_, done| {
    ///         let id = done.id().get();
    ///         done.complete(id);
    ///     },
    ///     |_, _| {},
    /// );
    /// assert_eq!(request.await?, 0); // the loop's first request
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn get(self) -> u64 {
        self.0
    }
}

/// How a request was answered.
pub(crate) enum Answer<V> {
    /// Completed with a value; dropped with its panic caught wherever nobody takes it (its wait
    /// gave up: the value goes with the request's own table, as the completer lets go of it in
    /// `run_once` or on a library's thread).
    Value(DropCaught<V>),
    /// Its completer was dropped unused, or the pump closed.
    Failed(Error),
    /// Its `start` panicked: resumed in the task awaiting the request (a payload nobody takes
    /// is dropped with its own panic caught, as a value is).
    Panicked(DropCaught<Box<dyn Any + Send>>),
}

/// The library's end of a request: complete it once with the result, on the loop's thread
/// (typically from `run_once`, where the C library reports what finished).
///
/// Dropped without completing, it ends the request with [`Error::Unanswered`] (or with the
/// pump's close reason, if the pump closed): nobody waits for ever on a C object the binding
/// forgot. Dropped as a panic unwinds in its pump's `run_once`, it ends the request once that
/// run ended: with [`Error::Panicked`] if the panic left `run_once` (the pump failed), as
/// unanswered if `run_once` caught it.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Error, Pump};
///
/// # futures_lite::future::block_on(async {
/// let (_pump, library) = Pump::builder().build_with_state(|_| Ok(()), |_, _| None)?;
/// // Completed at once here; a binding keeps it with the C object until the library reports.
/// let answered = library.request(|_, done| done.complete(7_u8), |_, ()| {});
/// assert_eq!(answered.await, Ok(7));
/// // Dropped without completing: the request is not left waiting for ever.
/// let forgotten = library.request(|_, done: ffi_pump::Completer<u8>| drop(done), |_, ()| {});
/// assert_eq!(forgotten.await, Err(Error::Unanswered));
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[must_use = "a request ends with Error::Unanswered if its completer is dropped unused"]
pub struct Completer<V: 'static> {
    table: Completions<(), Answer<V>>,
    id: RequestId,
    core: Weak<Core>,
    answered: bool,
    /// What `start` returned is kept under this key; answered, it is dropped.
    kept: Option<(kept::Key, Weak<dyn Forget>)>,
}

impl<V: 'static> Completer<V> {
    pub(crate) fn new(
        table: Completions<(), Answer<V>>,
        id: RequestId,
        core: Weak<Core>,
        kept: Option<(kept::Key, Weak<dyn Forget>)>,
    ) -> Self {
        Completer {
            table,
            id,
            core,
            answered: false,
            kept,
        }
    }

    /// This request's id (the cancel is handed what `start` returned, which may be this).
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// Completes the request with `value`: its wait gets it (or, if the wait gave up, the value
    /// is dropped).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Completer, Pump};
    ///
    /// # futures_lite::future::block_on(async {
    /// // The library keeps the completers of its running work, and completes them as it finishes.
    /// let (_pump, library) = Pump::builder().build_with_state(
    ///     |_| Ok(Vec::<Completer<&str>>::new()),
    ///     |running, _| {
    ///         for done in running.drain(..) {
    ///             done.complete("finished"); // ffi::process(); then report each result
    ///         }
    ///         None
    ///     },
    /// )?;
    /// let result = library.request(|running, done| running.push(done), |_, _| {}).await?;
    /// assert_eq!(result, "finished");
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn complete(mut self, value: V) {
        self.answered = true;
        // A panic of its `start`, recorded first, stays the request's answer.
        let value = Answer::Value(DropCaught::new(value));
        if let Some(refused) = self.table.complete_first((), value) {
            crate::unwind::drop_caught(refused);
        }
    }

    /// The request is answered: what `start` returned goes, here if this is the loop's thread
    /// and it was kept already, or as `start` returns if answered inside it, else at the loop's
    /// next run.
    fn forget_kept(&mut self) {
        if let Some((key, forget)) = self.kept.take() {
            kept::forget(key, &forget);
        }
    }
}

impl<V: 'static> Drop for Completer<V> {
    fn drop(&mut self) {
        // Dropped unanswered as a panic unwinds in its own request's `start`: that start's
        // caller answers. Asked before the key is forgotten below.
        let left_to_start = !self.answered
            && std::thread::panicking()
            && self
                .kept
                .as_ref()
                .is_some_and(|&(key, _)| kept::leave_answer_to_start(key));
        self.forget_kept();
        if !self.answered && !left_to_start {
            let core = self.core.clone();
            let table = self.table.clone();
            let unanswered = move |escaped: bool| {
                let why = match escaped {
                    true => Error::Panicked,
                    false => (core.upgrade().and_then(|core| core.status().err()))
                        .unwrap_or(Error::Unanswered),
                };
                crate::unwind::drop_caught(table.complete_first((), Answer::Failed(why)));
            };
            // Dropped as a panic unwinds in its pump's `run_once`: if the panic leaves it, the
            // pump fails with `Panicked`, which is the answer; if `run_once` catches it (a C
            // callback the binding guards), the request was left unanswered — known once the run
            // ends. Any other panic (a call's, a library thread's) is caught or ends only its own
            // thread: the request was left unanswered.
            match self.core.upgrade() {
                Some(core) if crate::reentry::is_unwinding_its_loop(core.id()) => {
                    crate::reentry::answer_when_run_ends(core.id(), Box::new(unanswered));
                }
                _ => unanswered(false),
            }
        }
    }
}

impl<V: 'static> fmt::Debug for Completer<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Future returned by [`LoopHandle::request`](crate::LoopHandle::request): the value the
/// library completed the request with.
///
/// # Panics
///
/// Resumes the panic of the request's `start` (caught on the loop's thread, which goes on), as
/// [`LoopHandle::call`](crate::LoopHandle::call) does with its closure's; panics if polled again
/// after it completed.
///
/// # Cancel safety
///
/// Dropping it gives the request up: its cancel runs on the loop's thread (if its start ran and
/// it had not completed), as for [`WaitKey::on_cancel`]; a start that had not begun there yet
/// is dropped unrun.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Completer, Error, Pump, RequestId};
/// use std::collections::HashMap;
/// use std::time::Duration;
///
/// # futures_lite::future::block_on(async {
/// // Stand-in for a thread-affine C library that never finishes what it starts.
/// let (_pump, library) = Pump::builder()
///     .build_with_state(|_| Ok(HashMap::<RequestId, Completer<()>>::new()), |_, _| None)?;
/// let request = library.request(
///     |started, done| {
///         let id = done.id();
///         started.insert(id, done);
///         id
///     },
///     |started, id| drop(started.remove(&id)), // ffi::cancel(…), on the loop's thread
/// );
/// assert_eq!(request.timeout(Duration::from_millis(20)).await, Err(Error::TimedOut));
/// assert!(library.call(|started| started.is_empty()).await?, "cancelled");
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Request<V> {
    wait: WaitKey<(), Answer<V>>,
    id: RequestId,
}

impl<V> Request<V> {
    pub(crate) fn new(wait: WaitKey<(), Answer<V>>, id: RequestId) -> Self {
        Request { wait, id }
    }

    /// This request's id.
    pub fn id(&self) -> RequestId {
        self.id
    }
}

impl<V: Send + 'static> Request<V> {
    /// Gives up with [`Error::TimedOut`] after `timeout`, counted from this call (and runs the
    /// cancel). A value already completed wins over a zero timeout — unless `start` still runs
    /// as the deadline passes: a value it completed is not the request's yet, so the request
    /// ends with `TimedOut` at once, and its cancel, which runs after `start`, finds the work
    /// finished and cancels nothing (a panic `start` ends with then is dropped on the loop's
    /// thread, as one after the request was dropped is).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Error, Pump};
    /// use std::time::Duration;
    ///
    /// # futures_lite::future::block_on(async {
    /// let (_pump, handle) = Pump::builder().build_with_state(|_| Ok(Vec::new()), |_, _| None)?;
    /// let never = handle
    ///     .request(|kept, done| kept.push(done), |kept, _| kept.clear()) // never completed
    ///     .timeout(Duration::from_millis(20));
    /// assert_eq!(never.await, Err::<(), _>(Error::TimedOut));
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.wait = self.wait.timeout(timeout);
        self
    }

    /// Gives up with [`Error::TimedOut`] at `deadline`.
    pub fn deadline(mut self, deadline: std::time::Instant) -> Self {
        self.wait = self.wait.deadline(deadline);
        self
    }
}

impl<V: Send + 'static> Future for Request<V> {
    type Output = Result<V, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.wait)
            .poll(cx)
            .map(|outcome| match outcome {
                Ok(Answer::Value(value)) => Ok(value.into_inner()),
                Ok(Answer::Failed(why)) | Err(why) => Err(why),
                Ok(Answer::Panicked(panic)) => resume_unwind(panic.into_inner()),
            })
    }
}

impl<V> fmt::Debug for Request<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
