//! [`Rounds`]: how many runs finished, whether one is in progress, whether the pump is closed —
//! one word — and the event that announces each change to broadcast waits and turns.

use std::sync::atomic::Ordering::SeqCst;

use event_listener::{Event, EventListener};

use crate::sync::AtomicU64;

/// [`Rounds::state`]: a run is in progress.
const RUNNING: u64 = 1;
/// [`Rounds::state`]: the pump is closed; never cleared.
const CLOSED: u64 = 1 << 1;
/// [`Rounds::state`]: one finished run.
const ROUND: u64 = 1 << 2;

/// The pump's progress.
///
/// `state` packs the count of finished runs (bits 2 and up), [`RUNNING`] and [`CLOSED`], so one
/// load gives a consistent picture: "run *n* has started" is `round == n - 1` with `RUNNING`
/// set, and it has finished once `round == n`. Only the holder of the loop lock sets and clears
/// `RUNNING`, and a run's end clears it and counts the round in one step, so no reader sees a
/// finished run still running or a running one already counted.
///
/// Every access is `SeqCst`: the pump's protocol orders this word against others (the demand
/// word, the registry's arrivals, the event's listeners), and the waits read it to decide
/// whether to sleep.
#[derive(Debug)]
pub(crate) struct Rounds {
    state: AtomicU64,
    /// The last round whose checks were all evaluated: its first pass saw every entry, or a
    /// pass going on with it after its budget ran out finished it. Written with the loop lock
    /// held, only ever raised.
    checked: AtomicU64,
    /// "The loop ran" (also sent on close): broadcast waits and turns listen, then look.
    ran: Event,
}

/// One reading of [`Rounds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot(u64);

impl Snapshot {
    /// Runs finished.
    pub(crate) fn round(self) -> u64 {
        self.0 / ROUND
    }

    pub(crate) fn is_running(self) -> bool {
        self.0 & RUNNING != 0
    }

    pub(crate) fn is_closed(self) -> bool {
        self.0 & CLOSED != 0
    }

    /// Runs started: the finished ones and the one in progress.
    pub(crate) fn started(self) -> u64 {
        self.round() + u64::from(self.is_running())
    }
}

impl Default for Rounds {
    fn default() -> Self {
        Rounds {
            state: AtomicU64::new(0),
            checked: AtomicU64::new(0),
            ran: Event::new(),
        }
    }
}

impl Rounds {
    pub(crate) fn now(&self) -> Snapshot {
        Snapshot(self.state.load(SeqCst))
    }

    /// A run starts, unless the pump closed: `false` then. One step with the close's, so a
    /// close that returned has no run start after it, and one that comes after this finds the
    /// run in progress. Called by the holder of the loop lock only.
    pub(crate) fn start(&self) -> bool {
        let started = self.state.fetch_update(SeqCst, SeqCst, |state| {
            (state & CLOSED == 0).then_some(state | RUNNING)
        });
        started.is_ok()
    }

    /// The run in progress finished: counts it and clears [`RUNNING`] in one step; returns the
    /// new round. Called by the holder of the loop lock only, after [`start`](Rounds::start).
    pub(crate) fn finish(&self) -> u64 {
        let before = self.state.fetch_add(ROUND - RUNNING, SeqCst);
        Snapshot(before).round() + 1
    }

    /// The run that [`start`](Rounds::start) announced was not made (the pump closed first, as a
    /// loop's thread ran the calls queued before it): clears [`RUNNING`], counts nothing;
    /// returns the round as it stands.
    pub(crate) fn finish_without_run(&self) -> u64 {
        Snapshot(self.state.fetch_sub(RUNNING, SeqCst)).round()
    }

    /// Records that every check of round `round` has been evaluated.
    pub(crate) fn checked_through(&self, round: u64) {
        self.checked.fetch_max(round, SeqCst);
    }

    /// Whether every check of round `round` has been evaluated (or of a later round, which
    /// evaluated them all again).
    pub(crate) fn is_checked(&self, round: u64) -> bool {
        self.checked.load(SeqCst) >= round
    }

    /// Marks the pump closed; `true` if this call did.
    pub(crate) fn close(&self) -> bool {
        let before = self.state.fetch_or(CLOSED, SeqCst);
        before & CLOSED == 0
    }

    /// Listens for the next [`announce`](Rounds::announce). Listen first, then look at
    /// [`now`](Rounds::now), so an announcement between the two is not missed.
    pub(crate) fn listen(&self) -> EventListener {
        self.ran.listen()
    }

    /// Wakes every listener: a run finished, or the pump closed. Returns how many were woken.
    pub(crate) fn announce(&self) -> usize {
        self.ran.notify(usize::MAX)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Rounds;

    #[test]
    fn a_run_is_running_until_it_is_counted() {
        let rounds = Rounds::default();
        assert_eq!((rounds.now().round(), rounds.now().started()), (0, 0));
        assert!(rounds.start());
        assert!(rounds.now().is_running());
        assert_eq!((rounds.now().round(), rounds.now().started()), (0, 1));
        assert_eq!(rounds.finish(), 1);
        assert!(!rounds.now().is_running());
        assert_eq!((rounds.now().round(), rounds.now().started()), (1, 1));
        assert!(rounds.start());
        assert!(rounds.close());
        assert!(!rounds.close(), "closing twice");
        assert_eq!(
            rounds.finish(),
            2,
            "a run in progress at the close finishes, and counts"
        );
        assert!(rounds.now().is_closed());
        assert!(!rounds.start(), "no run starts once closed");
        assert!(!rounds.now().is_running());
    }

    #[test]
    fn a_rounds_checks_are_done_once_it_or_a_later_round_says_so() {
        let rounds = Rounds::default();
        assert!(!rounds.is_checked(1));
        rounds.checked_through(2);
        assert!(rounds.is_checked(1) && rounds.is_checked(2) && !rounds.is_checked(3));
        rounds.checked_through(1);
        assert!(rounds.is_checked(2), "never lowered");
    }
}
