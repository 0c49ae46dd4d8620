//! What the example bindings share: the data a C timer callback carries in a library (Tcl,
//! libuv) whose callbacks complete requests (`LoopHandle::request`), and the examples' reading
//! of the CPU they used.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use ffi_pump::Completer;

/// A timer that fired: when it was due, and when the C library ran its callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fired {
    /// When the timer was due.
    pub due: Instant,
    /// When its callback ran.
    pub at: Instant,
}

/// The timers of one loop, on the loop's thread: how many have neither fired nor been
/// cancelled (each [`Callback`] counts while it lives).
#[derive(Debug, Default)]
pub struct Timers {
    live: Rc<Cell<usize>>,
}

impl Timers {
    /// What the C callback of the timer of request `done`, due at `due`, carries.
    pub fn callback(&self, done: Completer<Fired>, due: Instant) -> Callback {
        self.live.set(self.live.get() + 1);
        Callback {
            due,
            done,
            _live: Live(self.live.clone()),
        }
    }

    /// Timers whose callback data is still alive: neither fired nor cancelled.
    pub fn pending(&self) -> usize {
        self.live.get()
    }
}

/// What a C timer callback carries: firing it completes the timer's request.
#[derive(Debug)]
pub struct Callback {
    due: Instant,
    done: Completer<Fired>,
    _live: Live,
}

/// Counts its timer among the live ones while it lives.
#[derive(Debug)]
struct Live(Rc<Cell<usize>>);

impl Callback {
    /// The timer fired: completes its request with when it was due and now.
    pub fn fire(self) {
        let at = Instant::now();
        self.done.complete(Fired { due: self.due, at });
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
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
