/// Who runs the checks of [`Pump::wait_until`](crate::Pump::wait_until) and
/// [`Pump::wait_for`](crate::Pump::wait_for) after each run of the loop; set with
/// [`Builder::strategy`](crate::Builder::strategy).
///
/// Both keep every check under the loop lock, never overlapping a run or another check.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Pump, Strategy};
///
/// let pump = Pump::builder().strategy(Strategy::Broadcast).build(|| {})?;
/// # Ok::<(), ffi_pump::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Strategy {
    /// The default. A wait hands its check to the pump, which runs every registered check right
    /// after each run, on its own thread, and wakes only the waits whose check succeeded. Per
    /// round the pump does O(pending) checks and O(finished) wake-ups, and no waiting task runs.
    ///
    /// The checks are stored inline, one vector per check type, and called without a lock per
    /// check, so a pass over many trivial checks is a loop over contiguous memory. The pump
    /// spends at most its [`check_budget`](crate::Builder::check_budget) at a stretch on
    /// checks; beyond that it lets go of the loop lock and goes on where it stopped at once,
    /// without running the C loop again, until every check of the round was seen.
    #[default]
    PumpEvaluated,
    /// The core protocol: after each run every waiting task wakes and checks itself under the
    /// loop lock. O(pending) task wake-ups and lock hand-offs per round: right for tens to a few
    /// thousand waits, and what [`Pump::wait_until_local`](crate::Pump::wait_until_local) always
    /// uses for checks that cannot move to the pump's thread.
    Broadcast,
}
