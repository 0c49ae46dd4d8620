//! Locking helpers shared by the pump's internal state.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, ignoring poison.
///
/// No code that can panic runs under the crate's std mutexes except user checks, which run under
/// `catch_unwind`; a poisoned lock therefore never holds half-updated data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
