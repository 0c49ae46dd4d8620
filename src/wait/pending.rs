//! [`Pending`]: a wait counted in the pump's demand for as long as it lives.

use std::sync::Arc;

use crate::core::Core;

/// Counts its wait as pending from its making to its drop.
///
/// A wait makes it before the pump can see the wait (before its check is registered, its key
/// inserted, its first look at the rounds), so a driver that finds the pump idle never sleeps
/// through it; the wait keeps it in its state while it waits, so leaving that state (done,
/// timed out, dropped, panicked) uncounts it.
pub(crate) struct Pending {
    core: Arc<Core>,
}

impl Pending {
    pub(crate) fn count(core: &Arc<Core>) -> Pending {
        core.demand.add_pending();
        Pending { core: core.clone() }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.core.demand.remove_pending();
    }
}
