//! User code that runs where a panic must not go on unwinding: drops of what the user handed
//! the pump (its `run_once` closure, the loop's state, a check's or a call's captures).
//!
//! Such a value is dropped wherever the last reference to it dies: inside a task's drop, which
//! aborts the process on smol when it panics, or in whichever waiting task happened to let go
//! last, which would then panic for somebody else's bug. Dropped here instead, a panic stays
//! in the pump, which reports it (see the crate docs, "Panics in user code").

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Drops `value`, catching a panic in its `Drop`; `true` if it panicked.
pub(crate) fn drop_caught<T>(value: T) -> bool {
    run_caught(move || drop(value))
}

/// Runs `f`, catching its panic; `true` if it panicked. For user code whose panic the pump
/// reports by other means (or, as a drop, does not report): the payload is let go of here.
pub(crate) fn run_caught(f: impl FnOnce()) -> bool {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => false,
        Err(payload) => {
            forget_payload(payload);
            true
        }
    }
}

/// Lets go of a caught panic's payload, which is user data too: a payload whose own `Drop`
/// panics is leaked rather than let that panic unwind out of the pump.
pub(crate) fn forget_payload(payload: Box<dyn std::any::Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

/// Drops each of `values` with [`drop_caught`]: a panic in one spares the others (a plain drop
/// of the collection would abort on a second panic).
pub(crate) fn drop_each_caught<T>(values: impl IntoIterator<Item = T>) {
    for value in values {
        drop_caught(value);
    }
}

/// Holds a value whose drop runs user code, and drops it with [`drop_caught`].
pub(crate) struct DropCaught<T>(Option<T>);

impl<T> DropCaught<T> {
    pub(crate) fn new(value: T) -> DropCaught<T> {
        DropCaught(Some(value))
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.0.as_mut().expect("taken only on the way out")
    }

    /// The value, to be dropped by a caller that reports a panic in its drop.
    pub(crate) fn into_inner(mut self) -> T {
        self.0.take().expect("taken only on the way out")
    }
}

impl<T> Drop for DropCaught<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            drop_caught(value);
        }
    }
}
