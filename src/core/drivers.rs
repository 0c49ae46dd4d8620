//! [`Drivers`]: whatever polls the pump future (a task, a thread that drives it, the loop's own
//! thread), how many are alive, and the right to be the one that ticks.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use async_lock::{Mutex, MutexGuardArc};

use crate::sync::AtomicUsize;

/// [`Drivers::state`]: a driver has existed.
const EVER: usize = 1;
/// [`Drivers::state`]: one live driver.
const DRIVER: usize = 1 << 1;

/// The pump's drivers.
///
/// `state` is `live drivers << 1 | EVER`: waits need a live driver (or they would never end),
/// and tell "nobody ever drove it" ([`Error::NotRunning`](crate::Error::NotRunning)) from "its
/// last driver left" ([`Error::Closed`](crate::Error::Closed)). `SeqCst`, like the other state
/// words: a wait reads it after the pump could have closed.
pub(crate) struct Drivers {
    state: AtomicUsize,
    /// Held by the active driver, the one that ticks; the others stand by for it.
    active: Arc<Mutex<()>>,
}

/// The right to be the active driver.
pub(crate) type Active = MutexGuardArc<()>;

impl Default for Drivers {
    fn default() -> Self {
        Drivers {
            state: AtomicUsize::new(0),
            active: Arc::new(Mutex::new(())),
        }
    }
}

impl Drivers {
    /// Counts a new driver.
    pub(crate) fn count(&self) {
        // The bit first: whoever sees the count sees that a driver existed.
        self.state.fetch_or(EVER, SeqCst);
        self.state.fetch_add(DRIVER, SeqCst);
    }

    /// Uncounts a driver; `true` if it was the last one.
    pub(crate) fn uncount(&self) -> bool {
        self.state.fetch_sub(DRIVER, SeqCst) / DRIVER == 1
    }

    /// Whether a driver is alive.
    pub(crate) fn any(&self) -> bool {
        self.state.load(SeqCst) >= DRIVER
    }

    /// Whether a driver ever existed.
    pub(crate) fn ever(&self) -> bool {
        self.state.load(SeqCst) & EVER != 0
    }

    /// Waits for the right to be the active driver.
    pub(crate) async fn activate(&self) -> Active {
        self.active.lock_arc().await
    }

    /// The right to be the active driver, if nobody has it.
    pub(crate) fn try_activate(&self) -> Option<Active> {
        self.active.try_lock_arc()
    }
}
