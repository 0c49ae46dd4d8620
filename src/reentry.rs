//! Which pumps, if any, this thread is inside of: running their loop or one of their checks.
//!
//! A C callback inside `run_once` (or a check) that calls back into the pump and blocks on it
//! would wait for a lock its own thread holds. Recording the pumps per thread lets those calls
//! fail with [`Error::Reentrant`](crate::Error::Reentrant) instead of deadlocking. Pumps nest
//! (pump A's `run_once` turns pump B, whose `run_once` calls back into A), so the thread keeps
//! every pump it is inside of, not only the innermost.

use std::cell::{Cell, RefCell};

/// How a request left unanswered as a panic unwound inside a loop is answered once that loop's
/// run ends: told whether the panic left `run_once`.
pub(crate) type Unwound = Box<dyn FnOnce(bool)>;

#[cfg(not(loom))]
std::thread_local! {
    static INSIDE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// The pump whose `run_once` this thread is in (the innermost), or 0.
    static RUNNING: Cell<usize> = const { Cell::new(0) };
    /// [`answer_when_run_ends`]'s answers, with their pump.
    static UNWOUND: RefCell<Vec<(usize, Unwound)>> = const { RefCell::new(Vec::new()) };
}

// Loom runs its threads on one OS thread, so "this thread" has to be loom's.
#[cfg(loom)]
loom::thread_local! {
    static INSIDE: RefCell<Vec<usize>> = RefCell::new(Vec::new());
    static RUNNING: Cell<usize> = Cell::new(0);
    static UNWOUND: RefCell<Vec<(usize, Unwound)>> = RefCell::new(Vec::new());
}

/// Marks this thread as inside the pump identified by `id` until dropped.
pub(crate) struct Inside {
    /// How many pumps this thread was inside of before; dropping goes back to that. `None` when
    /// the thread's record is gone (a pump used from another thread-local's destructor).
    depth: Option<usize>,
}

impl Inside {
    pub(crate) fn enter(id: usize) -> Inside {
        let depth = INSIDE
            .try_with(|inside| {
                let mut inside = inside.borrow_mut();
                inside.push(id);
                inside.len() - 1
            })
            .ok();
        Inside { depth }
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        if let Some(depth) = self.depth {
            // `truncate`, not `pop`: right even if an inner guard was leaked.
            let _ = INSIDE.try_with(|inside| inside.borrow_mut().truncate(depth));
        }
    }
}

/// Marks this thread as running the loop (`run_once`) of the pump identified by `id` until
/// dropped: a panic unwinding meanwhile is that loop's, which fails the pump. One word, saved
/// and put back: every run pays for it.
pub(crate) struct Running {
    id: usize,
    /// The pump whose loop this thread ran before (an outer run of a nesting pump), or 0.
    outer: usize,
}

impl Running {
    pub(crate) fn enter(id: usize) -> Running {
        let outer = RUNNING.try_with(|running| running.replace(id)).unwrap_or(0);
        Running { id, outer }
    }
}

/// Answers a request whose completer went as a panic unwound inside the loop of pump `id`
/// ([`is_unwinding_its_loop`]) once that run ends: only then is it known whether the panic left
/// `run_once` (the pump fails) or `run_once` caught it (a C callback guarded by the binding).
pub(crate) fn answer_when_run_ends(id: usize, answer: Unwound) {
    let mut answer = Some(answer);
    let _ = UNWOUND.try_with(|unwound| unwound.borrow_mut().extend(answer.take().map(|a| (id, a))));
    // In thread teardown there is no run to end: answered as if the panic left it.
    if let Some(answer) = answer {
        answer(true);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let id = self.id;
        let answers: Vec<Unwound> = UNWOUND
            .try_with(|unwound| {
                let mut unwound = unwound.borrow_mut();
                if unwound.is_empty() {
                    return Vec::new();
                }
                let (this, others) = std::mem::take(&mut *unwound)
                    .into_iter()
                    .partition::<Vec<_>, _>(|(pump, _)| *pump == id);
                *unwound = others;
                this.into_iter().map(|(_, answer)| answer).collect()
            })
            .unwrap_or_default();
        // Dropped as the panic leaves `run_once`, or after it returned.
        let escaped = std::thread::panicking();
        for answer in answers {
            crate::unwind::run_caught(|| answer(escaped));
        }
        let _ = RUNNING.try_with(|running| running.set(self.outer));
    }
}

/// Whether a panic unwinding on this thread now is the loop's of the pump identified by `id`
/// (rather than a call's, a check's, or any other code's, which the pump or its caller catches):
/// this thread is running that loop and unwinding.
pub(crate) fn is_unwinding_its_loop(id: usize) -> bool {
    std::thread::panicking()
        && RUNNING
            .try_with(Cell::get)
            .is_ok_and(|running| running == id)
}

/// Whether this thread is inside the pump identified by `id`, however deeply nested.
pub(crate) fn is_inside(id: usize) -> bool {
    INSIDE
        .try_with(|inside| inside.borrow().contains(&id))
        .unwrap_or(false)
}
