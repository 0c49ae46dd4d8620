//! Which pumps, if any, this thread is inside of: running their loop or one of their checks.
//!
//! A C callback inside `run_once` (or a check) that calls back into the pump and blocks on it
//! would wait for a lock its own thread holds. Recording the pumps per thread lets those calls
//! fail with [`Error::Reentrant`](crate::Error::Reentrant) instead of deadlocking. Pumps nest
//! (pump A's `run_once` turns pump B, whose `run_once` calls back into A), so the thread keeps
//! every pump it is inside of, not only the innermost.

use std::cell::RefCell;

#[cfg(not(loom))]
std::thread_local! {
    static INSIDE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// The pumps whose `run_once` this thread is in, innermost last.
    static RUNNING: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

// Loom runs its threads on one OS thread, so "this thread" has to be loom's.
#[cfg(loom)]
loom::thread_local! {
    static INSIDE: RefCell<Vec<usize>> = RefCell::new(Vec::new());
    static RUNNING: RefCell<Vec<usize>> = RefCell::new(Vec::new());
}

/// One of this thread's records of pumps.
#[derive(Clone, Copy)]
enum Record {
    /// The pumps it is inside of.
    Inside,
    /// The pumps whose `run_once` it is in.
    Running,
}

impl Record {
    /// `f` on the record; `None` once the thread's records are gone (a pump used from another
    /// thread-local's destructor).
    fn with<R>(self, f: impl FnOnce(&mut Vec<usize>) -> R) -> Option<R> {
        let key = match self {
            Record::Inside => &INSIDE,
            Record::Running => &RUNNING,
        };
        key.try_with(|record| f(&mut record.borrow_mut())).ok()
    }
}

/// Keeps a pump in one of this thread's records until dropped.
struct Entered {
    record: Record,
    /// How many pumps the record held before; dropping goes back to that.
    depth: Option<usize>,
}

impl Entered {
    fn new(record: Record, id: usize) -> Entered {
        let depth = record.with(|pumps| {
            pumps.push(id);
            pumps.len() - 1
        });
        Entered { record, depth }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if let Some(depth) = self.depth {
            // `truncate`, not `pop`: right even if an inner guard was leaked.
            self.record.with(|pumps| pumps.truncate(depth));
        }
    }
}

/// Marks this thread as inside the pump identified by `id` until dropped.
pub(crate) struct Inside {
    _entered: Entered,
}

impl Inside {
    pub(crate) fn enter(id: usize) -> Inside {
        Inside {
            _entered: Entered::new(Record::Inside, id),
        }
    }
}

/// Marks this thread as running the loop (`run_once`) of the pump identified by `id` until
/// dropped: a panic unwinding meanwhile is that loop's, which fails the pump.
pub(crate) struct Running {
    _entered: Entered,
}

impl Running {
    pub(crate) fn enter(id: usize) -> Running {
        Running {
            _entered: Entered::new(Record::Running, id),
        }
    }
}

/// Whether a panic unwinding on this thread now is the loop's of the pump identified by `id`
/// (rather than a call's, a check's, or any other code's, which the pump or its caller catches):
/// this thread is running that loop and unwinding.
pub(crate) fn is_unwinding_its_loop(id: usize) -> bool {
    std::thread::panicking()
        && Record::Running.with(|running| running.last() == Some(&id)) == Some(true)
}

/// Whether this thread is inside the pump identified by `id`, however deeply nested.
pub(crate) fn is_inside(id: usize) -> bool {
    Record::Inside.with(|inside| inside.contains(&id)) == Some(true)
}
