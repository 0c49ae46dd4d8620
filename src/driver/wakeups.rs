//! [`Wakeups`]: what the active driver waits for, and the next cause of a run.
//!
//! The driver decides, then acts: [`Wakeups::next`] works out why the loop must run next (a
//! kick, a tick, the loop's deadline, readiness of its descriptor), sleeping as long as there is
//! none; the driver then runs the loop for it. A new wake source is a new arm here.

use std::time::{Duration, Instant};

use futures_lite::{FutureExt, StreamExt};

use super::Cause;
use crate::core::Core;
use crate::reactor::Timer;
use crate::{Error, Next};

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Run the loop, for this.
    Run(Cause),
    /// Run the loop for the timer, armed for what the loop said then: unless a turn's run has
    /// said otherwise since (the timer is then armed again for that, and no run is made).
    Due(Cause, Next),
    /// Go on with the checks a pass left for lack of time; no run.
    Check,
    /// The pump is closed (or has just been closed for a failed trigger): stop driving.
    Stop,
}

/// What ended a sleep.
enum Woke {
    /// The interval or deadline timer, due at this instant.
    Timer(Instant),
    /// The readiness trigger's descriptor is readable.
    Ready,
    /// A kick, a first wait after idle, a close: look again.
    Demand,
    /// Waiting for readiness failed.
    TriggerFailed(std::io::ErrorKind),
}

/// The active driver's wake sources: the timer (interval or deadline), the demand (kicks, first
/// waits, close), the readiness trigger.
pub(crate) struct Wakeups<'a> {
    core: &'a Core,
    timer: Timer,
    /// The trigger's watch, made on the thread polling the driver (so a driver on tokio can
    /// watch with tokio's reactor).
    watch: Option<crate::trigger::Watch<'a>>,
    /// The last run was for readiness: look whether the library still has its descriptor.
    after_readiness: bool,
    /// The timer ticks at the interval (the loop said [`Next::Tick`](crate::Next::Tick)): it is
    /// left running from one sleep to the next, not re-armed. Cleared while idle: the ticks
    /// missed asleep are not owed.
    ticking: bool,
    /// When the ticking timer fires next, as far as this driver knows.
    next_tick: Option<Instant>,
    /// The idle spells ended when the ticks last started ([`Demand::spells_ended`]): a spell
    /// that ended since, which the driver slept through, starts them again.
    ///
    /// [`Demand::spells_ended`]: crate::core::Demand::spells_ended
    spells_ended: usize,
    /// The driver has not handed its thread back since the last step: a step that is due at
    /// once waits for one yield first.
    owes_yield: bool,
    /// When the last step began, while ticking: a tick that came due in a step longer than the
    /// interval is late; one that came due in a shorter step (a kick's run) is taken.
    step_began: Option<Instant>,
}

impl<'a> Wakeups<'a> {
    /// # Errors
    ///
    /// [`Error::Trigger`] if the readiness trigger cannot be watched here.
    ///
    /// `own_trigger`: the trigger of a loop on its own thread that made its descriptor set,
    /// which the pump's settings do not hold.
    pub(crate) fn new(
        core: &'a Core,
        own_trigger: Option<&'a crate::trigger::Trigger>,
    ) -> Result<Wakeups<'a>, Error> {
        // Armed for real before the first sleep, from what the loop said last.
        let timer = Timer::never();
        // `run_on_readable`, or the loop's own set.
        let trigger = core.trigger.as_ref().or(own_trigger);
        Ok(Wakeups {
            core,
            timer,
            watch: trigger
                .map(crate::trigger::Trigger::watch)
                .transpose()
                .map_err(Error::Trigger)?,
            after_readiness: false,
            ticking: false,
            next_tick: None,
            spells_ended: core.demand.spells_ended(),
            owes_yield: false,
            step_began: None,
        })
    }

    /// The next cause of a run; sleeps while there is none (and while the pump is idle).
    ///
    /// Between two steps the driver returns `Pending` at least once: a run slower than the
    /// interval leaves the timer overdue (and a kick may be waiting already), and without that
    /// the driver would run the loop again and again and a one-thread executor would run nothing
    /// else. It yields only then: a step it slept for costs no extra trip through the executor
    /// (on tokio, that trip would wake the other worker once per run).
    pub(crate) async fn next(&mut self) -> Step {
        let step = self.decide().await;
        self.owes_yield = true;
        self.step_began = self.ticking.then(Instant::now);
        step
    }

    /// Hands the thread back once if no sleep did since the last step.
    async fn pay_yield(&mut self) {
        if std::mem::take(&mut self.owes_yield) {
            futures_lite::future::yield_now().await;
        }
    }

    async fn decide(&mut self) -> Step {
        let core = self.core;
        // Ticks that came due while the last step took longer than the interval (a slow run,
        // waiters holding the loop lock), or more than an interval ago, are skipped, not made up
        // back to back: the next comes one interval after it. One that came due in a shorter
        // step (a kick's run) is taken as it is, late by less than that.
        if let Some(due) = self
            .next_tick
            .filter(|&due| self.ticking && due <= Instant::now())
        {
            let interval = core.config.interval;
            let overran = (self.step_began).is_some_and(|began| began.elapsed() > interval);
            if overran || due.elapsed() > interval {
                self.skip_late_ticks(due.elapsed());
            }
        }
        if std::mem::take(&mut self.after_readiness) {
            if let Some(Err(kind)) = self.watch.as_ref().map(|w| w.trigger().is_open()) {
                core.fail(Error::Trigger(kind));
                return Step::Stop;
            }
        }
        loop {
            if core.is_closed() {
                return Step::Stop;
            }
            // A kick or a request is taken only after the yield owed: a driver dropped while
            // it yields loses none.
            if !self.owes_yield && core.demand.take_kick() {
                return Step::Run(Cause::Kick);
            }
            if !self.owes_yield && core.demand.take_checks() {
                return Step::Check;
            }
            if core.demand.take_sweep() {
                core.registry.sweep(core.id());
                continue;
            }
            if core.demand.has_work() {
                self.pay_yield().await;
                continue;
            }
            let demand = core.demand.listen();
            if core.is_closed() || core.demand.has_work() {
                continue;
            }
            // Idle, there are no ticks and no deadlines, but readiness still runs the loop (the
            // library's own I/O: data to send, a peer that hung up), as kicks and calls do.
            let idle = core.demand.is_idle();
            // What the loop said when the timer was armed for it.
            let mut armed_for = None;
            if idle {
                self.ticking = false;
                core.registry.sweep(core.id());
            } else {
                let next = core.next.get();
                armed_for = Some(next);
                // An idle spell this driver slept through (the last wait gave up while the timer
                // ran): the ticks start again for the wait that ended it.
                let spells_ended = core.demand.spells_ended();
                if spells_ended != self.spells_ended {
                    self.spells_ended = spells_ended;
                    self.ticking = false;
                }
                match next {
                    // The first wait after idle gets its run one interval from now, not a burst
                    // of ticks the timer missed while asleep.
                    Next::Tick if !self.ticking => self.start_ticks(),
                    Next::Tick => {}
                    // Sleep exactly until the library says it has work; nothing due, no run.
                    Next::At(at) => {
                        self.timer.set_at(at);
                        self.ticking = false;
                    }
                    Next::Idle => {
                        self.timer = Timer::never();
                        self.ticking = false;
                    }
                }
            }
            let timer = &mut self.timer;
            let (woke, slept) = noting_sleep(
                async {
                    if idle {
                        return std::future::pending().await;
                    }
                    timer.next().await.map_or(Woke::Demand, Woke::Timer)
                }
                .or(async {
                    demand.await;
                    Woke::Demand
                })
                .or(readiness(self.watch.as_ref())),
            )
            .await;
            if slept {
                self.owes_yield = false;
            } else if !matches!(woke, Woke::Demand) {
                // A timer or readiness due at once: both are still due after the yield, or
                // due again for a standby driver if this one is dropped in it.
                self.pay_yield().await;
            }
            match woke {
                // The last wait may have ended while the timer ran: an idle pump does not run.
                // Nor does one whose loop said something else meanwhile (a turn's run): the
                // timer may have come due for what it no longer says, and is armed again.
                Woke::Timer(due) if !core.demand.is_idle() => {
                    if let Some(armed) = armed_for.filter(|&armed| armed == core.next.get()) {
                        return Step::Due(self.cause(due), armed);
                    }
                }
                Woke::Ready => {
                    self.after_readiness = true;
                    return Step::Run(Cause::Readiness);
                }
                Woke::TriggerFailed(kind) => {
                    core.fail(Error::Trigger(kind));
                    return Step::Stop;
                }
                Woke::Timer(_) | Woke::Demand => {}
            }
        }
    }

    /// A tick's cause; counts it if it came more than an interval late, and then starts the
    /// ticks again from now: the ones missed meanwhile (a slow run, a stalled executor) are
    /// skipped, not made up back to back.
    fn cause(&mut self, due: Instant) -> Cause {
        let core = self.core;
        if !self.ticking {
            // Before its first run a pump without ticks runs at once to hear the library's first
            // deadline: that run is the first wait's, not a deadline the library reported.
            return match core.rounds.now().round() {
                0 => Cause::Kick,
                _ => Cause::Deadline,
            };
        }
        let late = due.elapsed();
        if late > core.config.interval {
            self.skip_late_ticks(late);
        } else {
            self.next_tick = due.checked_add(core.config.interval);
        }
        Cause::Tick
    }

    /// Counts a tick taken `late` (or overrun by a step) and starts the ticks again from now: the
    /// ones missed meanwhile are skipped, not made up back to back.
    fn skip_late_ticks(&mut self, late: Duration) {
        self.core.counters.count_late_tick();
        self.core.span.late_tick(late);
        self.start_ticks();
    }

    /// Starts the ticks: the first one interval from now.
    fn start_ticks(&mut self) {
        let interval = self.core.config.interval;
        self.timer.set_interval(interval);
        self.ticking = true;
        self.next_tick = Instant::now().checked_add(interval);
    }
}

/// `future`'s output, and whether it returned `Pending` on the way.
async fn noting_sleep<F: std::future::Future>(future: F) -> (F::Output, bool) {
    let mut future = std::pin::pin!(future);
    let mut slept = false;
    let output = std::future::poll_fn(|cx| {
        let poll = future.as_mut().poll(cx);
        slept |= poll.is_pending();
        poll
    })
    .await;
    (output, slept)
}

/// Readiness of the pump's trigger, if it has one; otherwise never.
async fn readiness(watch: Option<&crate::trigger::Watch<'_>>) -> Woke {
    let Some(watch) = watch else {
        return std::future::pending().await;
    };
    if watch.trigger().is_readable_now() {
        // Still readable after the last run: run again, once the driver has yielded to the
        // tasks that run woke.
        return Woke::Ready;
    }
    match watch.readable().await {
        Ok(()) => Woke::Ready,
        Err(kind) => Woke::TriggerFailed(kind),
    }
}
