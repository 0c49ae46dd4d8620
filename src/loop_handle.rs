//! [`LoopHandle`]: the loop's state, reached on the loop's own thread.

use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use std::hash::Hash;

use crate::calls::{Calls, Cleanup, Reply, Ticket};
use crate::core::Core;
use crate::kept::StartEnded;
use crate::request::Answer;
use crate::{Completer, Completions, Emitter, Error, Request, RequestId, Subscription, WaitKey};

/// A handle on the state of a loop that lives on the pump's thread
/// ([`Builder::build_with_state`](crate::Builder::build_with_state)): runs closures there, with
/// the state, between two runs of the loop and never during one.
///
/// This is how a binding submits work to a thread-affine C library (add a transfer, create a
/// timer, cancel one) without a channel of its own: [`call`](LoopHandle::call) returns the
/// closure's value, [`post`](LoopHandle::post) does not wait for it. Both kick the pump, so the
/// closure runs, and the loop right after it, as soon as the thread is free — not at the next
/// tick. The state itself (`S`) need not be `Send`: it never leaves its thread. The handle is
/// `Clone + Send + Sync` and works from any runtime and from plain threads.
///
/// It does not keep the pump open: when the last [`Pump`](crate::Pump) handle goes, the pump
/// closes, and the handle's calls, posts, requests and subscriptions end with
/// [`Error::Closed`](crate::Error::Closed).
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
/// use std::cell::RefCell;
/// use std::rc::Rc;
///
/// # futures_lite::future::block_on(async {
/// // The state of a thread-affine C library: `Rc` is not `Send`, so it stays on its thread.
/// let (pump, handle) = Pump::builder().build_with_state(
///     |_setup| Ok(Rc::new(RefCell::new(Vec::<u32>::new()))),
///     |_jobs, _run| None, // run_once: nothing of its own is ever due
/// )?;
/// handle.post(|jobs| jobs.borrow_mut().push(1))?;
/// let len = handle.call(|jobs| { jobs.borrow_mut().push(2); jobs.borrow().len() }).await?;
/// assert_eq!(len, 2);
/// pump.close();
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
pub struct LoopHandle<S> {
    core: Arc<Core>,
    calls: Arc<Calls<S>>,
}

impl<S> Clone for LoopHandle<S> {
    fn clone(&self) -> Self {
        LoopHandle {
            core: self.core.clone(),
            calls: self.calls.clone(),
        }
    }
}

impl<S> fmt::Debug for LoopHandle<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopHandle")
            .field("name", &self.core.name)
            .finish_non_exhaustive()
    }
}

impl<S: 'static> LoopHandle<S> {
    pub(crate) fn new(core: Arc<Core>, calls: Arc<Calls<S>>) -> Self {
        LoopHandle { core, calls }
    }

    /// A [`Kicker`](crate::Kicker) for this loop's pump, for the state to keep: it kicks the
    /// pump (say, when the library queued work from a callback) and never keeps it alive, so the
    /// pump still closes on its last handle.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Kicker, Pump};
    ///
    /// # futures_lite::future::block_on(async {
    /// // The state keeps a kicker, e.g. for a C callback that queued outgoing data.
    /// let (pump, handle) = Pump::builder().build_with_state(|_| Ok(None::<Kicker>), |_, _| None)?;
    /// let kicker = handle.kicker();
    /// handle.call(move |state| *state = Some(kicker)).await?;
    /// drop((pump, handle)); // the pump closes although its state holds a kicker
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn kicker(&self) -> crate::Kicker {
        crate::Kicker::new(&self.core)
    }

    /// Runs `call` with the loop's state on the loop's thread, between two runs, and returns its
    /// value.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] (or the pump's failure) if the pump is closed before the closure ran;
    /// the closure is then dropped unrun. [`Error::Reentrant`] when awaited on the loop's own
    /// thread (from `run_once`, from a check, or from another call) before it ran, where it
    /// would wait for itself; the closure is then dropped unrun too. A call made on that thread
    /// and awaited on another is answered.
    ///
    /// # Panics
    ///
    /// A panic in `call` fails only this call: it resumes in the task awaiting the future; the
    /// pump and other calls go on.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future does not take the call back: if it was sent, it still runs.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// # futures_lite::future::block_on(async {
    /// let (_pump, handle) = Pump::builder().build_with_state(|_| Ok(40_u32), |_, _| None)?;
    /// assert_eq!(handle.call(|n| *n + 2).await?, 42);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn call<R, F>(&self, call: F) -> Call<R>
    where
        F: FnOnce(&mut S) -> R + Send + 'static,
        R: Send + 'static,
    {
        if let Err(why) = self.core.status() {
            // What the call captured goes here, its panic kept from the caller.
            crate::unwind::drop_caught(call);
            return Call::failed(&self.core, why);
        }
        let (reply, answer) = Reply::new();
        let sent = self
            .calls
            .push(Box::new(move |state: &mut S| answer.run(state, call)));
        if let Err(refused) = sent {
            crate::unwind::drop_caught(refused);
            return Call::failed(
                &self.core,
                self.core.status().err().unwrap_or(Error::Closed),
            );
        }
        self.core.kick();
        Call {
            core: self.core.clone(),
            state: CallState::Sent(reply),
        }
    }

    /// Runs `post` with the loop's state on the loop's thread, between two runs, without waiting
    /// for it. A panic in it is caught there and goes no further.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] (or the pump's failure) if the pump is closed; the closure is dropped
    /// unrun.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// # futures_lite::future::block_on(async {
    /// let (_pump, handle) = Pump::builder().build_with_state(|_| Ok(0_u32), |_, _| None)?;
    /// handle.post(|n| *n += 1)?;
    /// assert_eq!(handle.call(|n| *n).await?, 1); // calls run in order
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn post<F>(&self, post: F) -> Result<(), Error>
    where
        F: FnOnce(&mut S) + Send + 'static,
    {
        if let Err(why) = self.core.status() {
            crate::unwind::drop_caught(post);
            return Err(why);
        }
        let sent = self.calls.push(Box::new(move |state: &mut S| {
            crate::unwind::run_caught(|| post(state));
        }));
        if let Err(refused) = sent {
            crate::unwind::drop_caught(refused);
            return Err(self.core.status().err().unwrap_or(Error::Closed));
        }
        self.core.kick();
        Ok(())
    }
}

impl<S: 'static> LoopHandle<S> {
    /// Submits work to the C library and waits for its completion: sends `start` to the loop's
    /// thread (as [`post`](LoopHandle::post)), and returns the wait for `key` in `table`, which
    /// `run_once` completes when the work is done. If the wait gives up (times out, is dropped, or
    /// the pump closes), `cancel` runs on the loop's thread
    /// ([`WaitKey::on_cancel`](crate::WaitKey::on_cancel)) — if `start` ran: a wait that gives up
    /// while `start` still waits for that thread (busy in a long run or call) has `start` dropped
    /// unrun, so no work begins that nobody awaits and no cancel could take back. A panic in
    /// `start` is caught there (the loop goes on) and resumed in the task awaiting the wait, as
    /// with [`request`](LoopHandle::request) (a value `start` completed before it panicked is held
    /// back until it ended: the panic goes first); the wait gives up as it unwinds, so `cancel`
    /// runs for whatever `start` began before it panicked.
    ///
    /// The one call a binding needs per request: no channel, no kick, no cancel command of its
    /// own. If the pump is closed, `start` is dropped unrun and the wait ends with
    /// [`Error::Closed`].
    ///
    /// The key is the wait's from this call on, not from its first poll: if it is another
    /// wait's — pending, or given up with its `cancel` still to run — `start` is dropped unrun
    /// and the wait ends with [`Error::KeyInUse`], so no work is started that nobody would take
    /// or cancel. A value the table already holds for the key (completed while nobody waited)
    /// is the wait's answer, and `start` is dropped unrun too.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Completions, Pump};
    /// use std::collections::HashMap;
    /// use std::time::Duration;
    ///
    /// // Stand-in for a thread-affine C library: requests it finishes on its next run.
    /// struct Library {
    ///     requests: HashMap<u32, String>,
    ///     done: Completions<u32, usize>,
    /// }
    ///
    /// # futures_lite::future::block_on(async {
    /// let done = Completions::new();
    /// let table = done.clone();
    /// let (pump, library) = Pump::builder().build_with_state(
    ///     move |_| Ok(Library { requests: HashMap::new(), done: table }),
    ///     |library, _| {
    ///         for (id, text) in library.requests.drain() {
    ///             library.done.complete(id, text.len()); // ffi::process_requests()
    ///         }
    ///         None
    ///     },
    /// )?;
    /// let len = library
    ///     .submit(
    ///         &done,
    ///         1,
    ///         |library| { library.requests.insert(1, "hello".into()); },
    ///         |library| { library.requests.remove(&1); },
    ///     )
    ///     .timeout(Duration::from_secs(2))
    ///     .await?;
    /// assert_eq!(len, 5);
    /// # drop(pump);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn submit<K, V>(
        &self,
        table: &Completions<K, V>,
        key: K,
        start: impl FnOnce(&mut S) + Send + 'static,
        cancel: impl FnOnce(&mut S) + Send + 'static,
    ) -> WaitKey<K, V>
    where
        K: Eq + Hash + Clone + Send + 'static,
        V: Send + 'static,
    {
        // The cancel is held before `start` is sent, so no close between the two can drop a
        // cancel owed; it runs only if `start` ran.
        let started = Started::default();
        let ran = started.clone();
        let mut wait = WaitKey::new(self.core.clone(), table, key.clone())
            .on_cancel(self, move |state| {
                if ran.ran() {
                    cancel(state);
                }
            })
            .started_by(started.clone());
        // The key is taken before `start` goes: work is started only for a wait that will get
        // its value, or cancel it.
        if wait.claim() {
            let table = table.table.clone();
            // A closed pump drops `start`; the wait then ends with the pump's error.
            let kept = started.clone();
            let _ = self.post(started.marking(start, move |panic| {
                kept.keep_panic(panic);
                table.wake(&key);
            }));
        } else {
            // Refused (the key is in use, the pump closed): what `start` captured goes here, its
            // panic kept from the caller, as everywhere the pump drops a closure unrun.
            crate::unwind::drop_caught(start);
        }
        wait
    }
}

/// Whether a `start` sent to the loop's thread ran: a close may drop it unrun, and then its
/// cleanup has nothing to undo. A panic in it is the awaiting task's, even after `start`
/// completed its wait: a value completed inside `start` is held back until `start` returned.
#[derive(Clone, Default)]
pub(crate) struct Started(Arc<StartedState>);

#[derive(Default)]
struct StartedState {
    /// [`NOT_YET`], [`RAN`] (as it begins) or [`GAVE_UP`] (before it began: it never runs).
    start: AtomicU8,
    /// `start` runs now.
    running: AtomicBool,
    /// The waker of a wait that found its value while `start` ran, woken as `start` ends.
    held_back: crate::sync::Mutex<Option<Waker>>,
    /// Dropped caught if nobody resumes it: the wait that would may be dropped unpolled.
    panic: crate::sync::Mutex<Option<crate::unwind::DropCaught<Box<dyn std::any::Any + Send>>>>,
}

/// [`StartedState::start`]: `start` waits on the loop's thread's queue.
const NOT_YET: u8 = 0;
/// [`StartedState::start`]: `start` began.
const RAN: u8 = 1;
/// [`StartedState::start`]: the wait gave up before `start` began, which is dropped unrun.
const GAVE_UP: u8 = 2;

impl Started {
    fn ran(&self) -> bool {
        self.0.start.load(Ordering::SeqCst) == RAN
    }

    /// The wait gives up, or has its value: a `start` that has not begun never will (work
    /// nobody awaits, which its cancel could not take back once sent). Whichever of this and
    /// `start`'s beginning comes first wins; `true` if this did (then `start` never runs).
    pub(crate) fn give_up(&self) -> bool {
        let start = &self.0.start;
        (start.compare_exchange(NOT_YET, GAVE_UP, Ordering::SeqCst, Ordering::SeqCst)).is_ok()
    }

    /// For a wait that found its value: whether to leave it there for now — `start` still runs
    /// (then `waker` is woken as it ends) or ended in a panic, which goes first.
    pub(crate) fn holds_back(&self, waker: &Waker) -> bool {
        self.runs(waker) || crate::sync::lock(&self.0.panic).is_some()
    }

    /// Whether `start` runs now.
    pub(crate) fn is_running(&self) -> bool {
        self.0.running.load(Ordering::SeqCst)
    }

    /// Whether `start` runs now; if so `waker` is woken as it ends.
    fn runs(&self, waker: &Waker) -> bool {
        if !self.0.running.load(Ordering::SeqCst) {
            return false;
        }
        *crate::sync::lock(&self.0.held_back) = Some(waker.clone());
        // Ended meanwhile: its end found no waker to wake, or an older one.
        self.0.running.load(Ordering::SeqCst)
    }

    /// Keeps the panic `start` ended with, for the awaiting task.
    fn keep_panic(&self, panic: Box<dyn std::any::Any + Send>) {
        let panic = Some(crate::unwind::DropCaught::new(panic));
        // What was kept before (none: `start` runs once) goes after the lock.
        drop(std::mem::replace(
            &mut *crate::sync::lock(&self.0.panic),
            panic,
        ));
    }

    /// The panic `start` ended with, once.
    pub(crate) fn take_panic(&self) -> Option<Box<dyn std::any::Any + Send>> {
        let panic = crate::sync::lock(&self.0.panic).take();
        panic.map(crate::unwind::DropCaught::into_inner)
    }

    /// `start`, marking this as it runs; a panic in it is caught and handed to `panicked`.
    fn marking<S>(
        self,
        start: impl FnOnce(&mut S) + Send + 'static,
        panicked: impl FnOnce(Box<dyn std::any::Any + Send>) + Send + 'static,
    ) -> impl FnOnce(&mut S) + Send {
        move |state| {
            // Running before it begins: a wait that finds it began (its give-up lost) finds it
            // running too, until it ended, and holds a value it completed back until then.
            self.0.running.store(true, Ordering::SeqCst);
            let begins = &self.0.start;
            if (begins.compare_exchange(NOT_YET, RAN, Ordering::SeqCst, Ordering::SeqCst)).is_err()
            {
                // Given up first: nothing begins, so its cancel finds nothing to undo. A wait
                // that saw it running meanwhile hears it ended, as below.
                self.0.running.store(false, Ordering::SeqCst);
                crate::unwind::drop_caught(start);
                self.ended();
                return;
            }
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| start(state))) {
                panicked(panic);
            }
            // After the panic is kept: a wait that sees `start` ended sees its panic too.
            self.0.running.store(false, Ordering::SeqCst);
            self.ended();
        }
    }

    /// Wakes a wait that found its value while `start` ran (or looked as if it would).
    fn ended(&self) {
        let held_back = crate::sync::lock(&self.0.held_back).take();
        if let Some(waker) = held_back {
            waker.wake();
        }
    }
}

/// A wait's cleanup held on the loop's thread ([`WaitKey::on_cancel`]): fired when the wait
/// gives up, released unrun when it is dropped unfired.
pub(crate) trait HeldCleanup: Send {
    /// Queues the cleanup for the loop's thread and kicks it. `false` if the thread took it
    /// already as it stopped (it ran there, or was dropped for want of a state).
    fn fire(&mut self) -> bool;
}

struct Held<S> {
    core: Arc<Core>,
    calls: Arc<Calls<S>>,
    ticket: Option<Ticket>,
}

impl<S> HeldCleanup for Held<S> {
    fn fire(&mut self) -> bool {
        let Some(ticket) = self.ticket.take() else {
            return false;
        };
        let queued = self.calls.fire(ticket);
        if queued {
            self.core.kick();
        }
        queued
    }
}

impl<S> Drop for Held<S> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.calls.release(ticket);
        }
    }
}

impl<S: 'static> LoopHandle<S> {
    /// The id of the pump whose loop this is.
    pub(crate) fn pump_id(&self) -> usize {
        self.core.id()
    }

    /// Holds `cleanup` for a wait that may give up ([`WaitKey::on_cancel`]); `None` if the
    /// pump is closed (the cleanup is dropped unrun: nothing was started for it to undo).
    pub(crate) fn hold_cleanup(&self, cleanup: Cleanup<S>) -> Option<Box<dyn HeldCleanup>> {
        if self.core.is_closed() {
            crate::unwind::drop_caught(cleanup);
            return None;
        }
        match self.calls.hold(cleanup) {
            Ok(ticket) => Some(Box::new(Held {
                core: self.core.clone(),
                calls: self.calls.clone(),
                ticket: Some(ticket),
            })),
            Err(cleanup) => {
                crate::unwind::drop_caught(cleanup);
                None
            }
        }
    }
}

impl<S: 'static> LoopHandle<S> {
    /// Starts work on the loop's thread and waits for its one result, with no table or id of the
    /// binding's own: `start` runs there with the state and a [`Completer`] (to keep with the C
    /// object it starts, and complete when the library reports it finished), and returns what a
    /// cancel needs (the C timer, the transfer handle, the callback data: it need not be `Send`);
    /// `cancel` runs there with it if the request gives up first (times out, is dropped, or the
    /// pump closes) — only if `start` ran, and not once the request was answered. A request that
    /// gives up before `start` began there (the thread busy in a long run or call) has `start`
    /// dropped unrun: no message goes out for nobody. What `start` returned is kept on the loop's
    /// thread until then, and dropped there once the request is answered: at once when answered on
    /// the loop's thread (from `run_once`, as C callbacks do), as `start` returns when answered
    /// inside it (a library that refuses the work at once), else at the loop's next run — which on
    /// a loop with nothing due comes with a kick, a call or readiness.
    ///
    /// [`submit`](LoopHandle::submit) is the same for a library whose results are keyed by its
    /// own ids in a [`Completions`] table.
    ///
    /// # Errors
    ///
    /// The request ends with the pump's error if the pump is closed (then `start` does not
    /// run), and with [`Error::Unanswered`] if the library drops the completer unused.
    ///
    /// # Panics
    ///
    /// A panic in `start` is caught on the loop's thread, which goes on, and resumed in the task
    /// awaiting the request, as a [`call`](LoopHandle::call)'s is — also after `start` completed
    /// it: a value completed inside `start` is the request's only once `start` returned (a
    /// deadline that passes before ends the request with `TimedOut`, without it:
    /// [`Request::timeout`](crate::Request::timeout)).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Completer, Pump, RequestId};
    /// use std::collections::HashMap;
    /// use std::time::Duration;
    ///
    /// // Stand-in for a thread-affine C library: lookups it answers on its next run.
    /// #[derive(Default)]
    /// struct Resolver {
    ///     lookups: HashMap<RequestId, (String, Completer<usize>)>,
    /// }
    /// // (`ffi::lookup_start` would return a handle for `ffi::lookup_cancel`: here the id.)
    ///
    /// # futures_lite::future::block_on(async {
    /// let (_pump, resolver) = Pump::builder().build_with_state(|_| Ok(Resolver::default()), |resolver, _| {
    ///     for (_, (name, done)) in resolver.lookups.drain() {
    ///         done.complete(name.len()); // ffi::process(); then each answer
    ///     }
    ///     None
    /// })?;
    /// let answer = resolver
    ///     .request(
    ///         |resolver, done| {
    ///             let id = done.id();
    ///             resolver.lookups.insert(id, ("example.org".into(), done));
    ///             id // what the cancel needs
    ///         },
    ///         |resolver, id| {
    ///             resolver.lookups.remove(&id); // ffi::lookup_cancel(handle)
    ///         },
    ///     )
    ///     .timeout(Duration::from_secs(2))
    ///     .await?;
    /// assert_eq!(answer, 11);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn request<V, T, F, C>(&self, start: F, cancel: C) -> Request<V>
    where
        V: Send + 'static,
        T: 'static,
        F: FnOnce(&mut S, Completer<V>) -> T + Send + 'static,
        C: FnOnce(&mut S, T) + Send + 'static,
    {
        let id = RequestId(self.calls.next_request());
        let key = (self.core.id(), id.get());
        let table = Completions::new();
        let answers = table.clone();
        let forget: Weak<dyn crate::kept::Forget> = Arc::downgrade(&self.calls) as _;
        let done = Completer::new(
            table.clone(),
            id,
            Arc::downgrade(&self.core),
            Some((key, forget)),
        );
        let wait = self.submit(
            &table,
            (),
            move |state| match crate::kept::run_start(key, || start(state, done)) {
                StartEnded::Returned(kept) => crate::kept::keep(key, Box::new(kept)),
                // Answered already: nothing to cancel, and no run may come soon to drop it.
                StartEnded::Answered(kept) => {
                    crate::unwind::drop_caught(kept);
                }
                // Its completer went in a panic that `start` caught: unanswered, so nothing is
                // kept for a cancel.
                StartEnded::CompleterLost(kept) => {
                    drop(answers.complete((), Answer::Failed(Error::Unanswered)));
                    crate::unwind::drop_caught(kept);
                }
                // Its completer went as it unwound, unanswered: the request is answered with
                // the panic, for the awaiting task.
                StartEnded::Panicked(panic) => drop(
                    answers.complete((), Answer::Panicked(crate::unwind::DropCaught::new(panic))),
                ),
            },
            move |state| {
                if let Some(kept) = crate::kept::take::<T>(key) {
                    cancel(state, kept);
                }
            },
        );
        Request::new(wait, id)
    }
}

impl<S: 'static> LoopHandle<S> {
    /// Subscribes to many values (bus signals, incoming messages, an I/O watch, a repeating
    /// timer): `start` runs on the loop's thread with the state and an [`Emitter`] (to keep, and
    /// emit values with, typically from `run_once`), and returns what `stop` needs (the C
    /// subscription, the callback data: it need not be `Send`), kept on the loop's thread; the
    /// values arrive in order on the returned [`Subscription`], a `Stream`. Dropping the stream
    /// runs `stop` there with the state and what `start` returned, to unsubscribe in C — only
    /// if `start` returned (a stream dropped before `start` began there has it dropped unrun:
    /// nothing is subscribed in C), and not if the library ended the subscription first (with
    /// [`Emitter::end`] or by dropping the emitter: what `start` returned is then dropped on the
    /// loop's thread, as a request's is once answered). A close ends the stream with the pump's
    /// reason, after running `stop`. No table or id of the binding's own.
    ///
    /// `capacity` bounds the values held and not yet taken: past it, [`Emitter::emit`] hands the
    /// value back and the library decides what to do with it. A zero capacity is taken as one.
    ///
    /// A panic in `start` is caught on the loop's thread, which goes on, and ends the stream as
    /// the library would (`None`, and no `stop`): the emitter goes with the panic, or, kept
    /// before it, is refused from then on and its [`end`](Emitter::end) returns `true` (the
    /// library unsubscribes in C itself). A panic in `stop` is caught there too.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Emitter, Pump};
    /// use futures_lite::StreamExt;
    ///
    /// # futures_lite::future::block_on(async {
    /// // A library with one signal source: each subscriber gets every value, until it goes.
    /// let (pump, bus) = Pump::builder().build_with_state(|_| Ok(Vec::<Emitter<u32>>::new()), |_, _| None)?;
    /// let mut signals = bus.subscribe(16, |subscribers, signal| subscribers.push(signal), |_, _| {});
    /// bus.call(|subscribers| {
    ///     for value in 1..=3 {
    ///         subscribers.retain(|signal| signal.emit(value).is_ok()); // ffi::dispatch()
    ///     }
    /// })
    /// .await?;
    /// assert_eq!(signals.next().await, Some(Ok(1)));
    /// assert_eq!(signals.next().await, Some(Ok(2)));
    /// assert_eq!(signals.next().await, Some(Ok(3)));
    /// pump.close();
    /// assert_eq!(signals.next().await, Some(Err(ffi_pump::Error::Closed)));
    /// assert_eq!(signals.next().await, None);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn subscribe<V, T, F, C>(&self, capacity: usize, start: F, stop: C) -> Subscription<V>
    where
        V: Send + 'static,
        T: 'static,
        F: FnOnce(&mut S, Emitter<V>) -> T + Send + 'static,
        C: FnOnce(&mut S, T) + Send + 'static,
    {
        let id = RequestId(self.calls.next_request());
        let key = (self.core.id(), id.get());
        let forget: Weak<dyn crate::kept::Forget> = Arc::downgrade(&self.calls) as _;
        let channel = crate::subscription::Channel::new(capacity.max(1));
        let emitter = Emitter::new(
            channel.clone(),
            id,
            Arc::downgrade(&self.core),
            (key, forget),
        );
        // Held until the stream is dropped; at a close it runs with the other cleanups. What
        // `start` returned is there only if it ran, returned, and the library has not ended the
        // subscription (the emitter let go of it then, or is about to: dropped here).
        let (ended, started) = (channel.clone(), channel.clone());
        let stopped = channel.stop_guard();
        let held = self.hold_cleanup(Box::new(move |state| {
            // Dropped last: a stream the close ends waits for this stop.
            let _stopped = stopped;
            let kept = crate::kept::take::<T>(key);
            match (state.filter(|_| !ended.ended_by_the_library()), kept) {
                (Some(state), Some(kept)) => {
                    crate::unwind::run_caught(|| stop(state, kept));
                }
                (_, kept) => {
                    crate::unwind::drop_caught(kept);
                }
            }
        }));
        // A closed pump drops `start`, and the emitter with it: the stream ends with the
        // pump's reason. A panic in `start` ends it as the library would, nothing kept.
        let _ = self.post(move |state: &mut S| {
            // Unsubscribed while `start` waited in the queue: nothing begins, so the stop that
            // follows finds nothing to stop.
            if started.unsubscribed() {
                crate::unwind::drop_caught((start, emitter));
                return;
            }
            match crate::kept::run_start(key, || start(state, emitter)) {
                StartEnded::Returned(kept) => crate::kept::keep(key, Box::new(kept)),
                // Ended by the library inside `start`: no stop will take it.
                StartEnded::Answered(kept) | StartEnded::CompleterLost(kept) => {
                    crate::unwind::drop_caught(kept);
                }
                // Ended as the library would, even if it kept its emitter before the panic.
                StartEnded::Panicked(panic) => {
                    crate::unwind::drop_caught(panic);
                    started.end_for_a_panicked_start();
                }
            }
        });
        Subscription::new(channel, self.core.clone(), id, held)
    }
}

enum CallState<R> {
    Sent(Arc<Reply<R>>),
    Failed(Error),
    Done,
}

/// Future returned by [`LoopHandle::call`]: the closure's value, once it ran on the loop's
/// thread.
///
/// # Panics
///
/// Resumes the panic of its closure (caught on the loop's thread, which goes on); panics if
/// polled again after it completed.
///
/// # Cancel safety
///
/// Dropping it does not take the call back: a call that was sent still runs.
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
///
/// # futures_lite::future::block_on(async {
/// // The state of a loop on its thread: here a counter standing in for a C handle.
/// let (_pump, library) = Pump::builder().build_with_state(|_| Ok(0_u32), |_, _| None)?;
/// let call = library.call(|count| {
///     *count += 1;
///     *count
/// });
/// assert_eq!(call.await?, 1);
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Call<R> {
    core: Arc<Core>,
    state: CallState<R>,
}

impl<R> Call<R> {
    fn failed(core: &Arc<Core>, why: Error) -> Self {
        Call {
            core: core.clone(),
            state: CallState::Failed(why),
        }
    }
}

impl<R> Future for Call<R> {
    type Output = Result<R, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match std::mem::replace(&mut self.state, CallState::Done) {
            CallState::Sent(reply) => match reply.poll(cx) {
                // On the loop's thread the call would wait for itself, wherever it was made.
                Poll::Pending if crate::reentry::is_inside(self.core.id()) => {
                    match reply.refuse() {
                        Some(Ok(value)) => Poll::Ready(Ok(value)),
                        Some(Err(panic)) => resume_unwind(panic),
                        None => Poll::Ready(Err(Error::Reentrant)),
                    }
                }
                Poll::Pending => {
                    self.state = CallState::Sent(reply);
                    Poll::Pending
                }
                Poll::Ready(Some(Ok(value))) => Poll::Ready(Ok(value)),
                Poll::Ready(Some(Err(panic))) => resume_unwind(panic),
                Poll::Ready(None) => {
                    Poll::Ready(Err(self.core.status().err().unwrap_or(Error::Closed)))
                }
            },
            CallState::Failed(why) => Poll::Ready(Err(why)),
            CallState::Done => panic!("a call future was polled after it completed"),
        }
    }
}

impl<R> Unpin for Call<R> {}

impl<R> fmt::Debug for Call<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call").finish_non_exhaustive()
    }
}
