//! [`Demand`]: whether anyone needs the loop to run — pending waits and a kick, one word — and
//! the event that wakes the driver when that changes.

use std::sync::atomic::Ordering::SeqCst;

use event_listener::{Event, EventListener};

use crate::sync::AtomicUsize;

/// [`Demand::state`]: a kick is waiting for its run.
const KICKED: usize = 1;
/// [`Demand::state`]: checks were cut short by their budget (a round's, or the arrivals') and go
/// on, with no run.
const CHECKS: usize = 1 << 1;
/// [`Demand::state`]: enough waits gave up for a sweep of the registry (see
/// [`Registry::sweep_due`](crate::registry::Registry::sweep_due)).
const SWEEP: usize = 1 << 2;
/// [`Demand::state`]: one pending wait.
const WAIT: usize = 1 << 3;

/// What the driver serves.
///
/// `state` is `pending waits << 3 | SWEEP | CHECKS | KICKED`, so "is the pump idle?" is one load
/// compared with zero, and no reader can see the count and the bits from two different moments. A
/// wait adds itself before the pump can see it ([`Pending`](crate::wait::Pending)), so a driver
/// that finds the pump idle never sweeps away a wait that is about to register. The kick bit is set
/// by [`kick`](Demand::kick) and taken by the driver's [`take_kick`](Demand::take_kick) before the
/// run it asks for, so a kick during a run causes one more run, and a burst causes one.
///
/// Every access is `SeqCst`: the driver listens on `wake`, then reads this word, and a wait or a
/// kicker writes it, then notifies; either the driver reads the write or its listener hears the
/// notification.
#[derive(Debug)]
pub(crate) struct Demand {
    state: AtomicUsize,
    /// Wakes the driver: the first pending wait, a kick, a close.
    wake: Event,
    /// [`Builder::idle_stop`](crate::Builder::idle_stop): without it the pump is never idle.
    idle_stop: bool,
    /// How many times a wait found no other pending: an idle spell ended (or the first wait
    /// came). A driver that slept through a spell, never woken for it, restarts its ticks.
    spells_ended: AtomicUsize,
}

impl Demand {
    pub(crate) fn new(idle_stop: bool) -> Demand {
        Demand {
            state: AtomicUsize::new(0),
            wake: Event::new(),
            idle_stop,
            spells_ended: AtomicUsize::new(0),
        }
    }

    /// Counts a wait as pending, waking an idle driver for the first one.
    pub(crate) fn add_pending(&self) {
        if self.state.fetch_add(WAIT, SeqCst) < WAIT {
            self.spells_ended.fetch_add(1, SeqCst);
            self.wake.notify(usize::MAX);
        }
    }

    /// How many idle spells have ended (see `spells_ended`); 0 for ever on a pump that does not
    /// stop while idle, whose ticks go on.
    pub(crate) fn spells_ended(&self) -> usize {
        match self.idle_stop {
            true => self.spells_ended.load(SeqCst),
            false => 0,
        }
    }

    /// A pending wait ended.
    pub(crate) fn remove_pending(&self) {
        self.state.fetch_sub(WAIT, SeqCst);
    }

    pub(crate) fn pending(&self) -> usize {
        self.state.load(SeqCst) / WAIT
    }

    /// Asks the driver for a run as soon as possible.
    pub(crate) fn kick(&self) {
        self.state.fetch_or(KICKED, SeqCst);
        self.wake.notify(usize::MAX);
    }

    /// Takes the kick, if there is one: the caller runs the loop for it.
    pub(crate) fn take_kick(&self) -> bool {
        self.state.fetch_and(!KICKED, SeqCst) & KICKED != 0
    }

    /// Asks the driver to go on with checks a pass left for lack of time, without a run.
    pub(crate) fn go_on_checking(&self) {
        self.state.fetch_or(CHECKS, SeqCst);
        self.wake.notify(usize::MAX);
    }

    /// Takes the request to go on checking, if there is one: the caller goes on with the checks
    /// (or runs the loop, which starts a new round of them).
    pub(crate) fn take_checks(&self) -> bool {
        self.state.fetch_and(!CHECKS, SeqCst) & CHECKS != 0
    }

    /// Asks the driver to take the given-up waits' entries out of the registry, between its
    /// runs: their checks hold what they captured, which a wait's drop must not drop (it would
    /// run other waits' `Drop` code wherever a task happened to give up).
    pub(crate) fn sweep(&self) {
        if self.state.fetch_or(SWEEP, SeqCst) & SWEEP == 0 {
            self.wake.notify(usize::MAX);
        }
    }

    /// Takes the request to sweep, if there is one: the caller sweeps.
    pub(crate) fn take_sweep(&self) -> bool {
        self.state.fetch_and(!SWEEP, SeqCst) & SWEEP != 0
    }

    /// Whether a kick, a sweep or the rest of some checks waits for the driver.
    pub(crate) fn has_work(&self) -> bool {
        self.state.load(SeqCst) & (KICKED | CHECKS | SWEEP) != 0
    }

    /// Whether the driver may sleep until woken: nobody waits, nobody kicked, no checks left, no
    /// sweep asked for.
    pub(crate) fn is_idle(&self) -> bool {
        self.idle_stop && self.state.load(SeqCst) == 0
    }

    /// Listens for the next change the driver must see. Listen first, then look.
    pub(crate) fn listen(&self) -> EventListener {
        self.wake.listen()
    }

    /// Wakes the driver (and any driver standing by) to look again: the pump closed, or a run
    /// the driver did not make said something new about the next.
    pub(crate) fn wake_driver(&self) {
        self.wake.notify(usize::MAX);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Demand;

    #[test]
    fn idle_means_no_wait_and_no_kick() {
        let demand = Demand::new(true);
        assert!(demand.is_idle());
        demand.add_pending();
        demand.add_pending();
        assert_eq!(demand.pending(), 2);
        demand.kick();
        assert!(demand.has_work());
        assert_eq!(demand.pending(), 2, "a kick does not count as a wait");
        demand.remove_pending();
        demand.remove_pending();
        assert!(!demand.is_idle(), "the kick keeps the pump busy");
        assert!(demand.take_kick());
        assert!(!demand.take_kick(), "a kick is taken once");
        assert!(demand.is_idle());
        demand.go_on_checking();
        assert!(!demand.is_idle(), "checks left keep the pump busy");
        assert_eq!(demand.pending(), 0, "checks left are not a wait");
        assert!(demand.take_checks());
        assert!(!demand.has_work() && demand.is_idle());
        assert!(
            !Demand::new(false).is_idle(),
            "without idle stop the pump is never idle"
        );
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use std::sync::Arc;

    use super::Demand;

    /// A driver that finds the pump idle and sleeps is always woken by a first wait, and by a
    /// kick, that comes in meanwhile, whatever the interleaving: listen, look, sleep.
    #[test]
    fn an_idle_driver_always_wakes_for_a_wait_or_a_kick() {
        for kick in [false, true] {
            loom::model(move || {
                let demand = Arc::new(Demand::new(true));
                let source = {
                    let demand = demand.clone();
                    loom::thread::spawn(move || match kick {
                        true => demand.kick(),
                        false => demand.add_pending(),
                    })
                };
                // The driver's loop, as `Wakeups::next` runs it.
                loop {
                    let woken = demand.listen();
                    if demand.take_kick() || !demand.is_idle() {
                        break;
                    }
                    loom::future::block_on(woken);
                }
                source.join().unwrap();
            });
        }
    }
}
