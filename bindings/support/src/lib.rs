//! What the example bindings share: the bookkeeping of timers made in a C library (Tcl,
//! libuv) whose callbacks complete waits, and the examples' reading of the CPU they used.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use ffi_pump::Completions;

/// A timer that fired: when it was due, and when the C library ran its callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fired {
    /// When the timer was due.
    pub due: Instant,
    /// When its callback ran.
    pub at: Instant,
}

/// The timers of one loop, on the loop's thread: the table their waits look in, and the ids
/// whose callback ran since the binding last looked (so it can free what it kept for them).
#[derive(Debug)]
pub struct Timers {
    fired: Completions<u64, Fired>,
    done: Rc<RefCell<Vec<u64>>>,
}

impl Timers {
    /// Timers whose callbacks complete their id in `fired`.
    pub fn new(fired: Completions<u64, Fired>) -> Timers {
        Timers {
            fired,
            done: Rc::new(RefCell::new(Vec::new())),
        }
    }

    /// What the C callback of timer `id`, due at `due`, carries.
    pub fn callback(&self, id: u64, due: Instant) -> Callback {
        Callback {
            id,
            due,
            fired: self.fired.clone(),
            done: self.done.clone(),
        }
    }

    /// The ids whose callback ran since the last call.
    pub fn take_fired(&self) -> Vec<u64> {
        std::mem::take(&mut *self.done.borrow_mut())
    }
}

/// What a C timer callback carries: completing it completes the timer's wait.
#[derive(Debug)]
pub struct Callback {
    id: u64,
    due: Instant,
    fired: Completions<u64, Fired>,
    done: Rc<RefCell<Vec<u64>>>,
}

impl Callback {
    /// The timer fired: completes its id with when it was due and now.
    pub fn fire(&self) {
        let fired = Fired {
            due: self.due,
            at: Instant::now(),
        };
        self.fired.complete(self.id, fired);
        self.done.borrow_mut().push(self.id);
    }
}

/// CPU time of every thread of this process so far, in ns (`/proc/self/task/*/schedstat`; 0
/// where that does not exist). Threads that ended before the call are not counted.
pub fn process_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}
