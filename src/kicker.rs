//! [`Kicker`]: a handle that asks for a run and never keeps the pump alive.

use std::fmt;
use std::sync::{Arc, Weak};

use crate::core::Core;

/// Asks a pump for a run as soon as possible ([`Pump::kick`](crate::Pump::kick)), without
/// keeping the pump alive: for the loop's own state or a C callback, which would otherwise have
/// to hold a [`Pump`](crate::Pump), and then the pump could never close on its last handle.
///
/// Made by [`Pump::kicker`](crate::Pump::kicker) or
/// [`LoopHandle::kicker`](crate::LoopHandle::kicker). `Clone + Send + Sync`; kicking never
/// blocks.
///
/// # Examples
///
/// ```
/// use ffi_pump::Pump;
///
/// let pump = Pump::new(|| {});
/// let kicker = pump.kicker();
/// assert!(kicker.kick()); // the pump is there (not driven yet: the run waits for a driver)
/// drop(pump); // the last handle: the pump closes, whoever holds a kicker
/// assert!(!kicker.kick());
/// ```
#[derive(Clone)]
pub struct Kicker {
    core: Weak<Core>,
}

impl Kicker {
    pub(crate) fn new(core: &Arc<Core>) -> Kicker {
        Kicker {
            core: Arc::downgrade(core),
        }
    }

    /// Asks for a run as soon as possible, as [`Pump::kick`](crate::Pump::kick) does. Returns
    /// whether the pump was still open to hear it.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// let pump = Pump::new(|| {});
    /// let kicker = pump.kicker();
    /// pump.close();
    /// assert!(!kicker.kick()); // closed: nothing to run
    /// ```
    pub fn kick(&self) -> bool {
        match self.core.upgrade() {
            Some(core) if !core.is_closed() => {
                core.kick();
                true
            }
            _ => false,
        }
    }

    /// Whether the pump is closed (or gone).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    ///
    /// let pump = Pump::new(|| {});
    /// let kicker = pump.kicker();
    /// assert!(!kicker.is_closed());
    /// pump.close();
    /// assert!(kicker.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.core.upgrade().is_none_or(|core| core.is_closed())
    }
}

impl fmt::Debug for Kicker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kicker")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}
