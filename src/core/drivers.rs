//! [`Drivers`]: whatever polls the pump future (a task, a thread that drives it, the loop's own
//! thread), how many are alive, and the right to be the one that ticks.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use crate::sync::{fence, AtomicBool, AtomicUsize};

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
    active: Arc<ActiveSlot>,
}

/// The right to be the active driver, and the standbys' word that it was let go of.
///
/// Not an async mutex, which hands each release to one waiter: a standby handed it and then
/// never polled again (a `run()` that lost a `select!`, a task on a runtime nobody drives any
/// more) took the release with it, and a driven standby never took over — the pending waits
/// got no run (a probe, 10 of 10). Every release is told to every standby, as the loop lock's
/// are (`LoopLock::lock`).
struct ActiveSlot {
    taken: AtomicBool,
    released: event_listener::Event,
}

/// The right to be the active driver, until dropped.
pub(crate) struct Active(Arc<ActiveSlot>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.taken.store(false, SeqCst);
        // Pairs with the fence in `Drivers::activate`: either its try sees the slot free, or
        // this notification reaches its listener.
        fence(SeqCst);
        self.0.released.notify(usize::MAX);
    }
}

impl Default for Drivers {
    fn default() -> Self {
        Drivers {
            state: AtomicUsize::new(0),
            active: Arc::new(ActiveSlot {
                taken: AtomicBool::new(false),
                released: event_listener::Event::new(),
            }),
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

    /// Waits for the right to be the active driver: tried again at every release.
    pub(crate) async fn activate(&self) -> Active {
        loop {
            let released = self.active.released.listen();
            fence(SeqCst);
            if let Some(active) = self.try_activate() {
                return active;
            }
            released.await;
        }
    }

    /// The right to be the active driver, if nobody has it.
    pub(crate) fn try_activate(&self) -> Option<Active> {
        let slot = &self.active;
        (slot.taken.compare_exchange(false, true, SeqCst, SeqCst))
            .ok()
            .map(|_| Active(slot.clone()))
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use std::sync::Arc;

    use super::Drivers;

    /// A standby that waits for the right to be active gets it once the active driver lets go,
    /// whatever the interleaving, also with another standby that never comes back for it: the
    /// release is told to every standby, not handed to one.
    #[test]
    fn a_standby_gets_the_right_once_the_active_driver_lets_go() {
        loom::model(|| {
            let drivers = Arc::new(Drivers::default());
            let active = drivers.try_activate().expect("nobody has it");
            // A standby that listened and is never polled again: its listener only.
            let _gone = drivers.active.released.listen();
            let standby = {
                let drivers = drivers.clone();
                loom::thread::spawn(move || {
                    let _active = loom::future::block_on(drivers.activate());
                })
            };
            drop(active);
            standby.join().unwrap();
            assert!(drivers.try_activate().is_some(), "let go again");
        });
    }
}
