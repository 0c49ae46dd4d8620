//! The synchronization primitives of the pump's internal state, and a poison-tolerant lock.
//!
//! Under `--cfg loom` (`tests/loom.rs`) they are loom's, so loom explores every interleaving of
//! the pump's own locks and atomics (and, through their `loom` features, async-lock's and
//! event-listener's). `Arc` and `Weak` stay std's in both builds: loom's `Arc` has neither
//! `Weak` nor unsized coercion, and reference counts are not what the models check.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

use std::sync::{PoisonError, TryLockError};

/// Locks `mutex`, ignoring poison.
///
/// No code that can panic runs under the crate's std mutexes except user checks, which run under
/// `catch_unwind`; a poisoned lock therefore never holds half-updated data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Locks `mutex` if it is free, ignoring poison; `None` if another thread holds it.
pub(crate) fn try_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// One step of a short spin: waiting for another thread to finish a few status checks.
///
/// Spins first (the wait is usually over within microseconds), then yields the thread, then —
/// a check that is slow, or blocked — sleeps between looks, so a long wait does not burn a core.
/// Under loom every step yields, as loom requires of spin loops.
pub(crate) fn spin_step(step: &mut u32) {
    #[cfg(loom)]
    {
        let _ = step;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        const SPINS: u32 = 64;
        const YIELDS: u32 = 256;
        if *step < SPINS {
            std::hint::spin_loop();
        } else if *step < SPINS + YIELDS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        *step = step.saturating_add(1);
    }
}
