//! Which pump, if any, this thread is inside of: running its loop or one of its wait checks.
//!
//! A C callback inside `run_once` (or a check) that calls back into the pump and blocks on it
//! would wait for a lock its own thread holds. Recording the pump per thread lets those calls
//! fail with [`Error::Reentrant`](crate::Error::Reentrant) instead of deadlocking.

use std::cell::Cell;

#[cfg(not(loom))]
std::thread_local! {
    static INSIDE: Cell<usize> = const { Cell::new(0) };
}

// Loom runs its threads on one OS thread, so "this thread" has to be loom's.
#[cfg(loom)]
loom::thread_local! {
    static INSIDE: Cell<usize> = Cell::new(0);
}

/// Marks this thread as inside the pump identified by `id` until dropped.
pub(crate) struct Inside {
    outer: usize,
}

impl Inside {
    pub(crate) fn enter(id: usize) -> Inside {
        Inside {
            outer: INSIDE.with(|inside| inside.replace(id)),
        }
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|inside| inside.set(self.outer));
    }
}

/// Whether this thread is inside the pump identified by `id`.
pub(crate) fn is_inside(id: usize) -> bool {
    INSIDE.with(|inside| inside.get() == id)
}
