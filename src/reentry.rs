//! Which pumps, if any, this thread is inside of: running their loop or one of their checks.
//!
//! A C callback inside `run_once` (or a check) that calls back into the pump and blocks on it
//! would wait for a lock its own thread holds. Recording the pumps per thread lets those calls
//! fail with [`Error::Reentrant`](crate::Error::Reentrant) instead of deadlocking. Pumps nest
//! (pump A's `run_once` turns pump B, whose `run_once` calls back into A), so the thread keeps
//! every pump it is inside of, not only the innermost.

use std::cell::RefCell;
use std::sync::Arc;

#[cfg(not(loom))]
std::thread_local! {
    static INSIDE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// The pumps whose `run_once` this thread is in, innermost last.
    static RUNNING: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// On a loop's own thread: the pumps inside which callers wait for it.
    static WAITED_ON_BY: RefCell<Option<Arc<Nested>>> = const { RefCell::new(None) };
}

// Loom runs its threads on one OS thread, so "this thread" has to be loom's.
#[cfg(loom)]
loom::thread_local! {
    static INSIDE: RefCell<Vec<usize>> = RefCell::new(Vec::new());
    static RUNNING: RefCell<Vec<usize>> = RefCell::new(Vec::new());
    static WAITED_ON_BY: RefCell<Option<Arc<Nested>>> = RefCell::new(None);
}

/// Marks this thread as inside the pump identified by `id` until dropped.
pub(crate) struct Inside {
    /// How many pumps this thread was inside of before; dropping goes back to that. `None` when
    /// the thread's record is gone (a pump used from another thread-local's destructor).
    depth: Option<usize>,
}

impl Inside {
    /// Marks this thread as inside each of `ids` (outermost first) until dropped.
    pub(crate) fn enter_all(ids: &[usize]) -> Inside {
        let depth = INSIDE
            .try_with(|inside| {
                let mut inside = inside.borrow_mut();
                let depth = inside.len();
                inside.extend_from_slice(ids);
                depth
            })
            .ok();
        Inside { depth }
    }

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
/// dropped: a panic unwinding meanwhile is that loop's, which fails the pump.
pub(crate) struct Running {
    depth: Option<usize>,
}

impl Running {
    pub(crate) fn enter(id: usize) -> Running {
        let depth = RUNNING
            .try_with(|running| {
                let mut running = running.borrow_mut();
                running.push(id);
                running.len() - 1
            })
            .ok();
        Running { depth }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(depth) = self.depth {
            let _ = RUNNING.try_with(|running| running.borrow_mut().truncate(depth));
        }
    }
}

/// Whether a panic unwinding on this thread now is the loop's of the pump identified by `id`
/// (rather than a call's, a check's, or any other code's, which the pump or its caller catches):
/// this thread is running that loop and unwinding.
pub(crate) fn is_unwinding_its_loop(id: usize) -> bool {
    std::thread::panicking()
        && RUNNING
            .try_with(|running| running.borrow().last() == Some(&id))
            .unwrap_or(false)
}

/// The pumps this thread is inside of, outermost first: empty on a thread that is in none (an
/// executor's, a caller's), which allocates nothing.
pub(crate) fn snapshot() -> Vec<usize> {
    INSIDE
        .try_with(|inside| inside.borrow().clone())
        .unwrap_or_default()
}

/// The pumps inside which threads wait for a pump's loop thread (a turn they asked of it): that
/// thread is inside them too meanwhile, as it would be on their own thread, so a call from it
/// back into one of them fails with `Reentrant` instead of waiting for a thread that waits for
/// it.
#[derive(Debug, Default)]
pub(crate) struct Nested {
    /// Each waiter's pumps, one entry per pump per waiter.
    ids: crate::sync::Mutex<Vec<usize>>,
    /// How many entries `ids` holds: the loop's thread looks at the list only when some.
    len: crate::sync::AtomicUsize,
}

impl Nested {
    /// Counts `ids` (a waiter's [`snapshot`]) until the returned guard is dropped.
    pub(crate) fn register(self: &Arc<Self>, ids: Vec<usize>) -> Registered {
        if !ids.is_empty() {
            let mut all = crate::sync::lock(&self.ids);
            all.extend_from_slice(&ids);
            self.len
                .store(all.len(), std::sync::atomic::Ordering::SeqCst);
        }
        Registered {
            nested: self.clone(),
            ids,
        }
    }

    /// Whether some waiter is inside the pump `id` now; without a lock when no waiter is inside
    /// any.
    fn contains(&self, id: usize) -> bool {
        self.len.load(std::sync::atomic::Ordering::SeqCst) != 0
            && crate::sync::lock(&self.ids).contains(&id)
    }
}

/// A waiter's pumps, counted in [`Nested`] until dropped.
pub(crate) struct Registered {
    nested: Arc<Nested>,
    ids: Vec<usize>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        if self.ids.is_empty() {
            return;
        }
        let mut all = crate::sync::lock(&self.nested.ids);
        for id in &self.ids {
            if let Some(at) = all.iter().position(|held| held == id) {
                all.swap_remove(at);
            }
        }
        (self.nested.len).store(all.len(), std::sync::atomic::Ordering::SeqCst);
    }
}

/// Makes this thread, a loop's own, inside the pumps `nested` counts, from now on.
pub(crate) fn waited_on_by(nested: Arc<Nested>) {
    let _ = WAITED_ON_BY.try_with(|waited| *waited.borrow_mut() = Some(nested));
}

/// Whether this thread is inside the pump identified by `id`, however deeply nested: itself, or,
/// on a loop's own thread, through a caller inside that pump that waits for this thread.
pub(crate) fn is_inside(id: usize) -> bool {
    let here = INSIDE
        .try_with(|inside| inside.borrow().contains(&id))
        .unwrap_or(false);
    here || WAITED_ON_BY
        .try_with(|waited| waited.borrow().as_ref().is_some_and(|n| n.contains(id)))
        .unwrap_or(false)
}
