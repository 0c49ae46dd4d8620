//! [`LoopHandle::subscribe`](crate::LoopHandle::subscribe): many values for one subscription
//! (bus signals, incoming messages, a repeating timer), as a `Stream`.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use futures_lite::Stream;

use crate::core::{CloseHook, Core};
use crate::loop_handle::HeldCleanup;
use crate::sync::{lock, Mutex};
use crate::wait::Pending;
use crate::{Error, RequestId};

/// What the emitter and the subscription share.
pub(crate) struct Channel<V> {
    state: Mutex<ChannelState<V>>,
    capacity: usize,
}

struct ChannelState<V> {
    values: VecDeque<V>,
    /// The subscription's waker, while it waits for a value.
    waker: Option<Waker>,
    /// The library dropped its emitter: no more values.
    emitter_gone: bool,
    /// The library's `start` panicked with its emitter kept somewhere: ended as the library
    /// would, the emitter's own end still to come (which then says the library unsubscribes).
    start_panicked: bool,
    /// The subscription was dropped, or ended: values are refused.
    subscriber_gone: bool,
    /// Its stop ran on the loop's thread (or went unrun: nothing to stop): a close ends the
    /// stream only then.
    stopped: bool,
    /// Counted from the stream's first wait for a value until it ends — the library ending it
    /// too, with nothing more to come — or is dropped, as a wait is: the pump keeps its timers
    /// for it meanwhile, polled or not.
    pending: Option<Pending>,
    /// A value was handed back for want of room: once the stream has taken enough to leave
    /// half the room free, it kicks the pump, so a library that keeps its refused values for its
    /// next run gets one.
    refused: bool,
}

impl<V> Channel<V> {
    /// Whether the library ended the subscription (dropped its emitter while the pump worked):
    /// then there is nothing to stop.
    pub(crate) fn ended_by_the_library(&self) -> bool {
        lock(&self.state).emitter_gone
    }

    /// Whether the subscription was dropped or ended: a `start` that has not run yet need not
    /// (nothing would take its values).
    pub(crate) fn unsubscribed(&self) -> bool {
        lock(&self.state).subscriber_gone
    }

    pub(crate) fn new(capacity: usize) -> Arc<Channel<V>> {
        Arc::new(Channel {
            state: Mutex::new(ChannelState {
                values: VecDeque::new(),
                waker: None,
                emitter_gone: false,
                start_panicked: false,
                subscriber_gone: false,
                stopped: false,
                pending: None,
                refused: false,
            }),
            capacity,
        })
    }

    fn wake(&self) {
        self.change(|_| ((), true));
    }

    /// The library's `start` panicked: the subscription ends as if the library had ended it —
    /// the emitter may have gone with the panic, or been kept before it, and is refused from now
    /// on (its `end` then says the library unsubscribes: no stop runs).
    pub(crate) fn end_for_a_panicked_start(&self) {
        let pending = self.change(|state| {
            let ends = !state.subscriber_gone && !state.emitter_gone;
            state.emitter_gone |= ends;
            state.start_panicked = ends;
            (if ends { state.pending.take() } else { None }, true)
        });
        drop(pending);
    }

    /// Says, once dropped, that the subscription's stop ran (or will never run), for a stream
    /// that waits for it to end with a close.
    pub(crate) fn stop_guard(self: &Arc<Self>) -> impl Drop + Send + 'static
    where
        V: Send + 'static,
    {
        struct Stopped<V>(Arc<Channel<V>>);
        impl<V> Drop for Stopped<V> {
            fn drop(&mut self) {
                self.0.change(|state| {
                    state.stopped = true;
                    ((), true)
                });
            }
        }
        Stopped(self.clone())
    }

    /// Changes the state under its lock; `change` says whether the subscription is to hear of it,
    /// and then its waker is woken, outside the lock.
    fn change<R>(&self, change: impl FnOnce(&mut ChannelState<V>) -> (R, bool)) -> R {
        let (outcome, waker) = {
            let mut state = lock(&self.state);
            let (outcome, wake) = change(&mut state);
            (outcome, if wake { state.waker.take() } else { None })
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        outcome
    }
}

impl<V: Send> CloseHook for Channel<V> {
    /// Wakes the subscription; it looks at its pump and ends with the close reason.
    fn closed(&self) {
        self.wake();
    }
}

/// The library's end of a subscription ([`LoopHandle::subscribe`](crate::LoopHandle::subscribe)):
/// emits values to it, on the loop's thread, typically from `run_once`.
///
/// Dropping it ends the subscription: the stream yields what it holds, then ends. Dropped as a
/// panic leaves `run_once`, it ends nothing: the pump fails, and the stream ends with
/// [`Error::Panicked`](crate::Error::Panicked), as a close ends every stream.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Emitter, Pump};
/// use futures_lite::StreamExt;
///
/// # futures_lite::future::block_on(async {
/// // Stand-in for a library that keeps its subscribers and emits to them at each run.
/// let (pump, library) = Pump::builder().build_with_state(
///     |_| Ok(Vec::<Emitter<u32>>::new()),
///     |subscribers, _| {
///         subscribers.retain(|emitter| emitter.emit(42).is_ok()); // gone ones are dropped
///         None
///     },
/// )?;
/// let mut values = library.subscribe(8, |subs, emitter| subs.push(emitter), |_, _| {});
/// pump.turn().await?;
/// assert_eq!(values.next().await, Some(Ok(42)));
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
pub struct Emitter<V: 'static> {
    channel: Arc<Channel<V>>,
    id: RequestId,
    core: Weak<Core>,
    /// Where what `start` returned is kept, to let go of it once the library ends the
    /// subscription: no stop will take it then.
    kept: (crate::kept::Key, Weak<dyn crate::kept::Forget>),
}

impl<V: 'static> Emitter<V> {
    pub(crate) fn new(
        channel: Arc<Channel<V>>,
        id: RequestId,
        core: Weak<Core>,
        kept: (crate::kept::Key, Weak<dyn crate::kept::Forget>),
    ) -> Self {
        Emitter {
            channel,
            id,
            core,
            kept,
        }
    }

    /// This subscription's id: unique among the requests and subscriptions of its pump.
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// Sends `value` to the subscription, after the values before it.
    ///
    /// # Errors
    ///
    /// Hands `value` back if the subscription holds its capacity's worth of values not yet taken
    /// (the library decides: drop it, keep it and try again at its next run, or stop reading from C
    /// for a while; once the stream has taken enough after such a refusal to leave half its
    /// capacity free, the pump runs the loop, as for a kick, so a loop that waits for nothing else
    /// gets that run), or if the subscription takes no more values: it was dropped (its stop is
    /// then on its way to the loop's thread, and runs whatever the library does with this emitter
    /// after), or its pump closed (the stream ends with the close reason, after the values emitted
    /// before; see [`is_open`](Emitter::is_open)).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Emitter, Pump};
    /// use futures_lite::StreamExt;
    ///
    /// # futures_lite::future::block_on(async {
    /// // A library that emits a tick on each of its runs to whoever subscribed.
    /// let (_pump, library) = Pump::builder().build_with_state(
    ///     |_| Ok((Vec::<Emitter<u32>>::new(), 0)),
    ///     |(subscribers, ticks), _| {
    ///         *ticks += 1;
    ///         subscribers.retain(|tick| tick.emit(*ticks).is_ok() || tick.is_open());
    ///         None
    ///     },
    /// )?;
    /// let mut ticks = library.subscribe(8, |(subscribers, _), tick| subscribers.push(tick), |_, _| {});
    /// let first = ticks.next().await.expect("not ended")?;
    /// library.kicker().kick();
    /// assert!(ticks.next().await.expect("not ended")? > first);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn emit(&self, value: V) -> Result<(), V> {
        let capacity = self.channel.capacity;
        // Taken before the channel's lock: the pump's last reference may go with it.
        let core = self.core.upgrade();
        self.channel.change(|state| {
            // Looked at under the channel's lock, as the stream looks at the values it holds
            // once it saw the close: a value taken here is yielded before the close reason.
            if state.subscriber_gone || state.emitter_gone || !open(core.as_ref()) {
                return (Err(value), false);
            }
            if state.values.len() >= capacity {
                state.refused = true;
                return (Err(value), false);
            }
            state.values.push_back(value);
            (Ok(()), true)
        })
    }

    /// Ends the subscription from the library's side (its C source finished, say): the stream
    /// yields what it holds, then ends (`None`). Returns whether this ended it: if so, its stop
    /// will not run (what its `start` returned is dropped on the loop's thread: here, if this
    /// is that thread), and the library unsubscribes in C itself if it has to; if not — the stream
    /// was dropped or ended first, or the pump closed — its stop runs (or ran) on the loop's
    /// thread (a stream that ended but is still held: once it is dropped, or at the close), and
    /// the library leaves the unsubscribing to it. One step under the subscription's lock, so
    /// the two never both unsubscribe, nor neither. Dropping the emitter ends it the same way,
    /// without saying which.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Emitter, Pump};
    /// use futures_lite::StreamExt;
    ///
    /// # futures_lite::future::block_on(async {
    /// // A library whose sources each send one value, then finish.
    /// let (_pump, library) = Pump::builder().build_with_state(
    ///     |_| Ok(Vec::<Emitter<u8>>::new()),
    ///     |finishing, _| {
    ///         for source in finishing.drain(..) {
    ///             let _ = source.emit(1);
    ///             if source.end() {
    ///                 // ffi::unsubscribe(…): the stop will not
    ///             }
    ///         }
    ///         None
    ///     },
    /// )?;
    /// let values = library.subscribe(4, |finishing, source| finishing.push(source), |_, _| {});
    /// assert_eq!(values.collect::<Vec<_>>().await, [Ok(1)]);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn end(self) -> bool {
        self.end_here()
    }

    /// [`end`](Emitter::end), which its drop does too (a second time, it ends nothing).
    fn end_here(&self) -> bool {
        end(&self.channel, &self.core, &self.kept)
    }

    /// Whether the subscription still takes values: it was not dropped, did not end, and its
    /// pump has not closed (an emitter the library keeps off the loop's thread outlives it).
    pub fn is_open(&self) -> bool {
        let core = self.core.upgrade();
        let state = lock(&self.channel.state);
        !state.subscriber_gone && !state.emitter_gone && open(core.as_ref())
    }
}

/// Whether the pump is there and has not closed: once it has, the stream ends with its reason.
fn open(core: Option<&Arc<Core>>) -> bool {
    core.is_some_and(|core| !core.is_closed())
}

/// Ends the subscription of `channel` for its library ([`Emitter::end`]); `kept` is where what
/// its `start` returned is kept.
fn end<V>(
    channel: &Channel<V>,
    core: &Weak<Core>,
    kept: &(crate::kept::Key, Weak<dyn crate::kept::Forget>),
) -> bool {
    // Dropped with the state as the pump closes: the stream ends with the close reason.
    let core = core.upgrade();
    let (ended, pending) = channel.change(|state| {
        let ends = open(core.as_ref()) && !state.subscriber_gone && !state.emitter_gone;
        state.emitter_gone |= ends;
        // Ended for it as its `start` panicked: nothing was kept for a stop.
        let ends = ends || std::mem::take(&mut state.start_panicked);
        // Nothing more comes: the stream no longer waits for the pump.
        let pending = if ends { state.pending.take() } else { None };
        ((ends, pending), true)
    });
    drop(pending);
    if ended {
        crate::kept::forget(kept.0, &kept.1);
    }
    ended
}

impl<V: 'static> Drop for Emitter<V> {
    fn drop(&mut self) {
        // Dropped as a panic unwinds in its pump's `run_once`: if the panic leaves it, the pump
        // fails, and the stream ends with `Panicked` as a close ends every stream (its stop runs
        // then); if `run_once` catches it (a C callback the binding guards), the library let go
        // of the emitter, which ends the subscription as a drop does — known once the run ends.
        match self.core.upgrade() {
            Some(core) if crate::reentry::is_unwinding_its_loop(core.id()) => {
                let (channel, weak, kept) =
                    (self.channel.clone(), self.core.clone(), self.kept.clone());
                let ending = move |escaped: bool| {
                    if !escaped {
                        end(&channel, &weak, &kept);
                    }
                };
                crate::reentry::answer_when_run_ends(core.id(), Box::new(ending));
            }
            _ => {
                let _ = self.end_here();
            }
        }
    }
}

impl<V: 'static> fmt::Debug for Emitter<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Emitter")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The stream returned by [`LoopHandle::subscribe`](crate::LoopHandle::subscribe): the values
/// the library emits, in order, as `Ok`.
///
/// It ends (`None`) when the library drops its [`Emitter`]. When the pump closes, it yields the
/// values it holds, then the close reason as one `Err` ([`Error::Closed`],
/// [`Error::Panicked`]…) once its stop ran on the loop's thread (polled on that thread itself,
/// at once), then ends. It holds at most the capacity given to `subscribe` of
/// values not yet taken; past that the emitter is refused (see [`Emitter::emit`]).
///
/// Polled on the loop's own thread (in `run_once`, a call, a C callback) with no value to hand,
/// it yields `Err(`[`Error::Reentrant`]`)` instead of waiting for a value only that thread can
/// emit, and ends (a value emitted after is handed back, as after a close).
///
/// # Cancel safety
///
/// Dropping it unsubscribes: its stop runs on the loop's thread (if its start ran and the
/// library had not ended it; a start that had not begun there yet is dropped unrun), and values
/// emitted after are refused.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Emitter, Pump};
/// use futures_lite::StreamExt;
///
/// # futures_lite::future::block_on(async {
/// // A library that emits three values, then ends the subscription itself.
/// let (_pump, library) = Pump::builder().build_with_state(|_| Ok(()), |_, _| None)?;
/// let values = library.subscribe(4, |_, emitter: Emitter<u8>| {
///     for value in 1..=3 {
///         let _ = emitter.emit(value);
///     }
/// }, |_, _| {});
/// let seen: Vec<_> = values.map(|value| value.expect("no close")).collect().await;
/// assert_eq!(seen, [1, 2, 3]);
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
#[must_use = "streams do nothing unless polled"]
pub struct Subscription<V> {
    channel: Arc<Channel<V>>,
    core: Arc<Core>,
    id: RequestId,
    /// The stop, held on the loop's thread until this is dropped.
    stop: Option<Box<dyn HeldCleanup>>,
    /// The close reason was yielded, or the stream ended.
    ended: bool,
}

impl<V: Send + 'static> Subscription<V> {
    pub(crate) fn new(
        channel: Arc<Channel<V>>,
        core: Arc<Core>,
        id: RequestId,
        stop: Option<Box<dyn HeldCleanup>>,
    ) -> Self {
        let hook: Arc<dyn CloseHook> = channel.clone();
        let hook: Weak<dyn CloseHook> = Arc::downgrade(&hook);
        core.close.hear(hook);
        Subscription {
            channel,
            core,
            id,
            stop,
            ended: false,
        }
    }

    /// This subscription's id, as its emitter knows it ([`Emitter::id`]; its stop is handed what
    /// its `start` returned, which may be this).
    pub fn id(&self) -> RequestId {
        self.id
    }
}

impl<V: Send + 'static> Stream for Subscription<V> {
    type Item = Result<V, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        loop {
            // Read before the look: a close seen here came after every value emitted (and any
            // end by the library) before it, which the look then finds.
            let closed = self.core.status().err();
            let step = {
                let mut state = lock(&self.channel.state);
                if let Some(value) = state.values.pop_front() {
                    // Once half the room is free: the library's next run refills it in one go,
                    // not one value per run.
                    let room = state.refused && state.values.len() <= self.channel.capacity / 2;
                    if room {
                        state.refused = false;
                    }
                    Step::Value(value, room)
                } else if state.emitter_gone {
                    // Ended by the library: a clean end, whatever happened to the pump since.
                    state.subscriber_gone = true;
                    Step::End(None)
                } else if let Some(why) = closed {
                    // Under the lock that emits take: a value emitted from now on is handed
                    // back, not left where nobody takes it.
                    state.subscriber_gone = true;
                    // The close runs the stop on the loop's thread: the stream ends after it,
                    // unless this is that thread (it would wait for itself).
                    let stopping = self.stop.is_some() && !state.stopped;
                    match stopping && !crate::reentry::is_inside(self.core.id()) {
                        true => {
                            state.waker = Some(cx.waker().clone());
                            Step::WaitForStop
                        }
                        false => Step::End(Some(why)),
                    }
                } else if crate::reentry::is_inside(self.core.id()) {
                    // Only the loop's own thread emits: waiting there would wait for itself. It
                    // ends, as a refused wait does, so nothing polls it again and again.
                    state.subscriber_gone = true;
                    Step::End(Some(Error::Reentrant))
                } else {
                    state.waker = Some(cx.waker().clone());
                    if state.pending.is_none() {
                        state.pending = Some(Pending::count(&self.core));
                    }
                    Step::Wait
                }
            };
            match step {
                Step::Value(value, room_after_a_refusal) => {
                    if room_after_a_refusal {
                        self.core.kick();
                    }
                    return Poll::Ready(Some(Ok(value)));
                }
                Step::End(why) => {
                    self.end();
                    return Poll::Ready(why.map(Err));
                }
                // Closed during the look: look again, for what came before the close. A close
                // from here on wakes the waker registered above.
                Step::Wait if self.core.status().is_err() => continue,
                Step::Wait => return Poll::Pending,
                Step::WaitForStop => return Poll::Pending,
            }
        }
    }
}

/// What one look at the channel found.
enum Step<V> {
    /// A value; `true` if one was refused for want of room since the last was taken.
    Value(V, bool),
    /// The stream ends: cleanly (`None`), or with why (the close reason, or `Reentrant` on the
    /// loop's thread with nothing to hand).
    End(Option<Error>),
    Wait,
    /// Closed: the stop is to run first.
    WaitForStop,
}

impl<V> Subscription<V> {
    fn end(&mut self) {
        self.ended = true;
        let pending = lock(&self.channel.state).pending.take();
        drop(pending);
    }
}

impl<V> Drop for Subscription<V> {
    fn drop(&mut self) {
        let (emitter_gone, values, pending) = {
            let mut state = lock(&self.channel.state);
            state.subscriber_gone = true;
            state.waker = None;
            let values = std::mem::take(&mut state.values);
            (state.emitter_gone, values, state.pending.take())
        };
        drop(pending);
        // User code (the values' `Drop`) outside the lock, its panics kept here.
        crate::unwind::drop_each_caught(values);
        if let Some(mut stop) = self.stop.take() {
            // Ended by the library: nothing to stop. Otherwise the stop goes to the loop's
            // thread (or ran there already, at a close).
            if !emitter_gone {
                stop.fire();
            }
        }
    }
}

impl<V> fmt::Debug for Subscription<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
