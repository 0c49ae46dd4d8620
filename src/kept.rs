//! What a request's `start` returned ([`LoopHandle::request`](crate::LoopHandle::request)),
//! kept on the loop's thread until the request's cancel takes it or the request is answered: the
//! C timer, the transfer handle, the callback data — so the binding keeps no table of its own to
//! find them again.
//!
//! The values need not be `Send`: they are made, kept, taken and dropped on the loop's thread
//! only, in a map of that thread, by pump and request.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// A request: its pump's id and its own.
pub(crate) type Key = (usize, u64);

thread_local! {
    static KEPT: RefCell<HashMap<Key, Box<dyn Any>>> = RefCell::new(HashMap::new());
    /// The request whose `start` runs on this thread now, and what became of its completer.
    static STARTING: Cell<Option<(Key, CompleterState)>> = const { Cell::new(None) };
}

/// What became of the completer of a request while its `start` ran.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CompleterState {
    /// Kept, as far as `start` knows: what it returns is kept until the request is answered.
    Kept,
    /// Answered (or dropped unanswered, which answers it) inside `start`, on this thread:
    /// nothing is kept for a cancel.
    Answered,
    /// Dropped unanswered in a panic, leaving the answer to [`run_start`]'s caller.
    Lost,
}

/// How a request's `start` ended ([`run_start`]).
pub(crate) enum StartEnded<T> {
    /// It returned, and its completer is kept (or went to another thread).
    Returned(T),
    /// It returned, and its completer was answered inside it: what it returned is not kept.
    Answered(T),
    /// It returned, but its completer went unanswered in a panic it caught itself.
    CompleterLost(T),
    /// It panicked; its completer, if it went with the panic, left the answer to the caller.
    Panicked(Box<dyn Any + Send>),
}

/// Runs `start`, the `start` of the request `key`, marked as such ([`leave_answer_to_start`]),
/// its panic caught.
pub(crate) fn run_start<T>(key: Key, start: impl FnOnce() -> T) -> StartEnded<T> {
    let before = STARTING
        .try_with(|starting| starting.replace(Some((key, CompleterState::Kept))))
        .ok()
        .flatten();
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(start));
    let completer = STARTING
        .try_with(|starting| starting.replace(before))
        .ok()
        .flatten()
        .map_or(CompleterState::Kept, |(_, completer)| completer);
    match (started, completer) {
        (Ok(value), CompleterState::Lost) => StartEnded::CompleterLost(value),
        (Ok(value), CompleterState::Answered) => StartEnded::Answered(value),
        (Ok(value), CompleterState::Kept) => StartEnded::Returned(value),
        (Err(panic), _) => StartEnded::Panicked(panic),
    }
}

/// For the completer of request `key`, answered: whether the `start` of that request runs on
/// this thread, whose caller then drops what it returns at once rather than keep it.
pub(crate) fn answered_in_start(key: Key) -> bool {
    STARTING
        .try_with(|starting| match starting.get() {
            Some((running, completer)) if running == key => {
                if completer == CompleterState::Kept {
                    starting.set(Some((key, CompleterState::Answered)));
                }
                true
            }
            _ => false,
        })
        .unwrap_or(false)
}

/// For the completer of request `key`, dropped unanswered as a panic unwinds: whether the
/// `start` of that request runs on this thread, which then answers it — with the panic if it
/// leaves `start`, as unanswered if `start` catches it.
pub(crate) fn leave_answer_to_start(key: Key) -> bool {
    STARTING
        .try_with(|starting| match starting.get() {
            Some((running, _)) if running == key => {
                starting.set(Some((key, CompleterState::Lost)));
                true
            }
            _ => false,
        })
        .unwrap_or(false)
}

/// Keeps `value` for `key` on this thread (the loop's).
pub(crate) fn keep(key: Key, value: Box<dyn Any>) {
    // In thread teardown there is nowhere to keep it: dropped here instead.
    let _ = KEPT.try_with(|kept| kept.borrow_mut().insert(key, value));
}

/// Takes what was kept for `key` on this thread, if it is a `T`.
pub(crate) fn take<T: 'static>(key: Key) -> Option<T> {
    let value = KEPT
        .try_with(|kept| kept.borrow_mut().remove(&key))
        .ok()??;
    value.downcast::<T>().ok().map(|value| *value)
}

/// Drops what was kept for `key`, if it was kept on this thread; `false` if not (another thread,
/// or not kept yet).
pub(crate) fn forget_here(key: Key) -> bool {
    // Taken out first: its `Drop` may call back into the crate (and this map).
    let value = KEPT
        .try_with(|kept| kept.borrow_mut().remove(&key))
        .ok()
        .flatten();
    let found = value.is_some();
    crate::unwind::drop_caught(value);
    found
}

/// Drops everything kept for the pump `pump` on this thread: the loop's thread, as it ends.
pub(crate) fn forget_pump(pump: usize) {
    let values: Vec<Box<dyn Any>> = KEPT
        .try_with(|kept| {
            let mut kept = kept.borrow_mut();
            let keys: Vec<Key> = kept.keys().filter(|key| key.0 == pump).copied().collect();
            keys.iter().filter_map(|key| kept.remove(key)).collect()
        })
        .unwrap_or_default();
    crate::unwind::drop_each_caught(values);
}

/// What was kept for `key` goes, its request answered (or its subscription ended by the
/// library): here if this is the loop's thread and it was kept already, or as its `start`
/// returns if that runs here now, else at the loop's next run (word sent through `forget`).
pub(crate) fn forget(key: Key, forget: &std::sync::Weak<dyn Forget>) {
    if !forget_here(key) && !answered_in_start(key) {
        if let Some(forget) = forget.upgrade() {
            forget.forget(key);
        }
    }
}

/// Where a request answered away from the loop's thread sends word to drop what was kept for it.
pub(crate) trait Forget: Send + Sync {
    /// Drops what was kept for `key`, on the loop's thread, at its next run.
    fn forget(&self, key: Key);
}
