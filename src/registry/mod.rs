//! The registry of pump-evaluated waits: their checks, which the pump evaluates right after each
//! run, waking only the waits whose check succeeded.
//!
//! Waits register into a short `incoming` list, so registering never waits for an evaluation in
//! progress; the next holder of the loop lock moves them into the slab and evaluates them (the
//! [`LoopGuard`](crate::core::LoopGuard) does, on letting go). The slab keeps one [column](column) per
//! check type, in which the checks are stored inline: the pass over thousands of entries is a
//! loop over contiguous memory that takes no lock per check.
//!
//! A wait that gives up marks its entry cancelled, and must then know that no check of it is
//! running or will run (its C object may be freed next). The evaluating thread announces which
//! block of [`BLOCK`] keys it is in ([`Registry::evaluating`]), then reads how many entries are
//! marked ([`Registry::marked`]) and, if any are, each entry's mark before its check; the wait
//! counts and marks itself, then reads the announcement. A fence on each side orders the two, so
//! either the evaluator sees the mark, or the wait sees that its block is being evaluated and
//! waits for the evaluator to leave it ([`Registry::wait_out`]): a few checks. One fence per
//! block of checks instead of a lock per check, and while nobody gives up, the pass touches only
//! the checks themselves. The pump drops a cancelled entry when it next meets it, or when it goes
//! idle, or once [`SWEEP_AT`] or more of them outnumber the live waits (the wait that gives up
//! then asks the driver to take them out). User code other than the checks (the drop of what a
//! check captured) never runs under these locks.

mod column;

use std::any::TypeId;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::sync::{
    fence, lock, spin_step, try_lock, AtomicBool, AtomicU64, AtomicUsize, Mutex, MutexGuard,
};
use column::{Column, Typed};

/// A registered wait, as the evaluating thread sees it: its check and what it shares with the
/// wait (its [`Mark`] among it).
pub(crate) trait Evaluate: Send + 'static {
    /// What a check that ended its wait hands to [`Evaluate::finish`].
    type Checked: Send;

    /// Runs the check once, unless `look_for_mark` and the wait gave up. Unless
    /// [`Evaluated::Pending`], the registry removes the entry.
    ///
    /// Called only under the loop lock, inside an announced block (or before the entry is in
    /// the registry at all), with `look_for_mark` unless no entry was marked when the block was
    /// announced.
    fn evaluate(&mut self, look_for_mark: bool) -> Evaluated<Self::Checked>;

    /// Starts fetching the state the entry shares with its wait, which [`Evaluate::finish`] is
    /// about to write. That state was allocated by the wait and last touched on its thread, so
    /// reaching it is likely a cache miss: a pass touches the state of every entry its checks
    /// ended before it finishes any, and the misses overlap instead of each stalling the pass.
    fn prefetch(&self) {}

    /// Tells the wait that its check ended it, with `checked`, after the pass's walk over the
    /// entry's column (the wait may have given up meanwhile: [`Finished::marked`]).
    fn finish(&self, checked: Self::Checked) -> Finished;

    /// Whether the wait gave up on this entry.
    fn is_cancelled(&self) -> bool;

    /// The waker of a wait that will never complete, because the pump closed.
    fn abandon(&self) -> Option<Waker>;

    /// Tells the wait where its entry is stored ([`Place::packed`]).
    fn stored_at(&self, place: u64);
}

/// What [`Evaluate::evaluate`] found.
pub(crate) enum Evaluated<C> {
    /// The check did not end the wait.
    Pending,
    /// The wait had given up (its mark counted in [`Registry::marked`]); its check did not run.
    GaveUp,
    /// The check ended the wait (succeeded or panicked), with this, for [`Evaluate::finish`].
    Checked(C),
}

/// A wait its check ended, told so.
pub(crate) struct Finished {
    /// The wait's waker, if it polled and did not give up.
    pub(crate) waker: Option<Waker>,
    /// Whether it was marked cancelled (and counted in [`Registry::marked`]).
    pub(crate) marked: bool,
}

/// An entry among the arrivals, not yet in its column, whatever its type.
pub(crate) trait Arrival: Send {
    /// Moves the entry into the column of its type.
    fn admit(self: Box<Self>, slab: &mut Slab) -> Place;

    /// [`Evaluate::abandon`].
    fn abandon(&self) -> Option<Waker>;
}

impl<E: Evaluate> Arrival for E {
    fn admit(self: Box<Self>, slab: &mut Slab) -> Place {
        slab.insert(*self)
    }

    fn abandon(&self) -> Option<Waker> {
        Evaluate::abandon(self)
    }
}

/// A wait's entry among the arrivals (it registered while the loop lock was busy).
pub(crate) type Entry = Box<dyn Arrival>;

/// Entries taken out of the registry, a batch per column, to be dropped by the caller once no
/// lock is held: with [`drop_removed`], entry by entry.
pub(crate) type Removed = Box<dyn Batch>;

/// A column's entries taken out together.
pub(crate) trait Batch: Send {
    /// Drops each entry with its panic caught: what a check captured may panic on drop, and
    /// dropping the batch whole would abort at a second such panic.
    fn drop_each(self: Box<Self>);
}

/// The most entries a spare vector kept for the next pass holds memory for: a burst of waits
/// ending together does not keep its memory.
pub(crate) const SPARE_AT_MOST: usize = 4096;

/// Keeps `emptied`'s memory in `spare` for the next pass, if it is more than `spare` has and at
/// most [`SPARE_AT_MOST`] entries.
pub(crate) fn keep_spare<T>(spare: &mut Vec<T>, emptied: Vec<T>) {
    debug_assert!(emptied.is_empty());
    if spare.capacity() < emptied.capacity() && emptied.capacity() <= SPARE_AT_MOST {
        *spare = emptied;
    }
}

/// Drops what evaluations or sweeps took out, with no lock held.
pub(crate) fn drop_removed(removed: impl IntoIterator<Item = Removed>) {
    for batch in removed {
        batch.drop_each();
    }
}

/// [`Registry::flags`]: entries arrived since the last evaluation.
const ARRIVED: usize = 1;
/// [`Registry::flags`]: the pump closed; the registry is to be abandoned.
const ABANDON_DUE: usize = 1 << 1;

/// What [`Registry::left_to_do`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeftToDo {
    Nothing,
    /// Evaluate the arrivals.
    Evaluate,
    /// End every registered wait: the pump closed.
    Abandon,
}

/// What [`Registry::evaluate_rest`] left for lack of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Left {
    /// Arrivals not evaluated yet.
    pub(crate) arrivals: bool,
    /// Entries of the round not seen yet.
    pub(crate) round: bool,
    /// The latest round whose every entry has now been evaluated since its run, if a round
    /// ended in this pass.
    pub(crate) checked: Option<u64>,
}

/// What [`Registry::evaluate`] did of the round its run began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Walked {
    /// Whether every round is walked through: nothing is left for
    /// [`evaluate_rest`](Registry::evaluate_rest).
    pub(crate) seen_all: bool,
    /// The latest round whose every entry has now been evaluated since its run, if a round
    /// ended in this pass.
    pub(crate) checked: Option<u64>,
}

/// Entries of waits that gave up, not yet taken out, past which the driver takes them out
/// ([`Registry::sweep_due`]).
pub(crate) const SWEEP_AT: usize = 1024;

/// Keys per announced block: a cancelling wait may wait for up to this many checks.
const BLOCK: usize = 64;

/// [`Registry::evaluating`]: nothing is being evaluated.
const NO_BLOCK: u64 = u64::MAX;

/// An entry's [`Place::packed`] before it is stored in the slab.
const NOT_ADMITTED: u64 = u64::MAX;

/// [`Mark::state`]: the entry is (or will be) in the registry, its check may run.
const PENDING: usize = 0;
/// [`Mark::state`]: the wait gave up; its check must not run again.
const CANCELLED: usize = 1;
/// [`Mark::state`]: the check succeeded or panicked; the registry removes the entry.
const FINISHED: usize = 2;

/// What a wait shares with the registry so that it can give up safely: whether its entry is
/// pending, cancelled or finished, and where the entry is stored.
pub(crate) struct Mark {
    /// [`PENDING`], then [`CANCELLED`] or [`FINISHED`], never both.
    state: AtomicUsize,
    /// [`Place::packed`], once stored.
    place: AtomicU64,
}

impl Mark {
    pub(crate) fn new() -> Mark {
        Mark {
            state: AtomicUsize::new(PENDING),
            place: AtomicU64::new(NOT_ADMITTED),
        }
    }

    /// Whether the wait gave up; for [`Evaluate::evaluate`] when it must look, and for sweeps.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.load(Acquire) == CANCELLED
    }

    /// Loads the mark's line into this core's cache ([`Evaluate::prefetch`]); relaxed, so the
    /// loads of several marks overlap.
    pub(crate) fn touch(&self) {
        std::hint::black_box(self.state.load(Relaxed));
    }

    /// Records that the entry's check finished it (succeeded or panicked); for
    /// [`Finished::marked`], whether its wait had marked it meanwhile: it gave up between its
    /// check and this (see [`Evaluate::finish`]), and its waker, if handed, is only a spurious
    /// wake of a task that no longer waits.
    pub(crate) fn finish(&self) -> bool {
        self.state.swap(FINISHED, AcqRel) == CANCELLED
    }

    /// Records where the entry is stored; for [`Evaluate::stored_at`].
    pub(crate) fn stored_at(&self, place: u64) {
        // Release: a wait that sees the block of this place announced sees the place too.
        self.place.store(place, Release);
    }
}

/// Where an entry is stored: its column, and its key in the column.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    column: u32,
    key: usize,
}

impl Place {
    fn new(column: u32, key: usize) -> Place {
        Place { column, key }
    }

    /// Column in the high half, key in the low half (a column never holds 2^32 entries: they
    /// would take more than 64 GiB).
    fn packed(self) -> u64 {
        (u64::from(self.column) << 32) | (self.key as u64 & 0xffff_ffff)
    }

    fn unpacked(packed: u64) -> Place {
        Place::new((packed >> 32) as u32, (packed & 0xffff_ffff) as usize)
    }

    /// The announcement of this entry's block.
    fn block(self) -> u64 {
        Place::new(self.column, self.key / BLOCK).packed()
    }
}

#[derive(Default)]
struct Incoming {
    entries: Vec<Entry>,
    closed: bool,
}

/// The admitted entries: a column per check type.
#[derive(Default)]
pub(crate) struct Slab {
    columns: Vec<Box<dyn Column>>,
    types: Vec<TypeId>,
    /// The column where the last pass stopped for lack of time.
    next_column: usize,
    /// The round the columns are walking (by the number of the run that began it), while it has
    /// entries left.
    walking: Option<u64>,
    /// The latest run's round, which begins once the one walking ends: a round is walked
    /// through before the next begins, so runs that come faster than the checks of a round
    /// take cannot keep any entry from its turn (each run beginning the walk anew kept the
    /// columns after the one a pass stopped in unseen for as long as runs came).
    latest: u64,
    /// Where the arrivals an evaluation admitted went and that no walk has evaluated yet: empty
    /// but for those a walk left for lack of time, its memory kept for the next evaluation.
    arrived: Vec<Place>,
}

impl Slab {
    fn insert<E: Evaluate>(&mut self, entry: E) -> Place {
        let type_id = TypeId::of::<E>();
        let index = match self.types.iter().position(|&t| t == type_id) {
            Some(index) => index,
            None => {
                self.types.push(type_id);
                self.columns
                    .push(Box::new(Typed::<E>::new(self.columns.len() as u32)));
                self.columns.len() - 1
            }
        };
        self.columns[index]
            .as_any()
            .downcast_mut::<Typed<E>>()
            .expect("the column of a type holds entries of that type")
            .insert(entry)
    }

    fn take_removed(&mut self, removed: &mut Vec<Removed>) {
        removed.extend(self.columns.iter_mut().filter_map(|c| c.take_removed()));
    }
}

/// One evaluation pass, as its columns see it.
pub(crate) struct Pass<'a> {
    registry: &'a Registry,
    /// Its budget; `None`: none.
    clock: Option<PassClock>,
    woken: &'a mut Vec<Waker>,
    /// Marked entries removed so far.
    unmarked: usize,
    /// Whether the checks of the announced block must look at their marks.
    look_for_marks: bool,
}

impl<'a> Pass<'a> {
    fn new(registry: &'a Registry, budget: Option<Duration>, woken: &'a mut Vec<Waker>) -> Self {
        Pass {
            registry,
            clock: budget.and_then(PassClock::new),
            woken,
            unmarked: 0,
            look_for_marks: false,
        }
    }

    fn announce(&mut self, block: u64) -> bool {
        self.look_for_marks = self.registry.announce(block);
        self.look_for_marks
    }

    /// Set once a check of this pass gave up a wait since the block was announced (the block's
    /// later checks must then look at their marks).
    #[inline(always)]
    fn withdrawn_inside(&self) -> &'a AtomicBool {
        &self.registry.withdrawn_inside
    }

    /// Announces that nothing is evaluated any more, uncounts the marked entries the pass
    /// removed, and hands the removed entries to `removed`.
    fn end(self, slab: &mut Slab, removed: &mut Vec<Removed>) {
        self.registry.announce(NO_BLOCK);
        self.registry.unmark(self.unmarked);
        slab.take_removed(removed);
    }
}

/// A pass's budget: when it is spent, and how often the walk looks at the clock — after every
/// entry while checks are slow, every [`PassClock::MAX_STRIDE`] while they are quick. The stride
/// starts at one entry in each column (another check type, another cost) and at most doubles
/// from look to look, so a pass overruns its budget by about one check while the checks cost
/// alike, and by at most the stride reached (≤ 256 entries) when slow checks follow quick ones
/// in one column.
struct PassClock {
    deadline: Instant,
    looked_at: Instant,
    /// Entries walked since the last look, and before the next.
    walked: usize,
    stride: usize,
}

impl PassClock {
    /// The most entries walked between two looks at the clock (a look costs about as much as a
    /// quick check).
    const MAX_STRIDE: usize = 256;

    /// The stride a pass, or a column, starts with. Under loom a fixed stride keeps the model
    /// deterministic: how the walk is cut must not follow the real clock there.
    const FIRST_STRIDE: usize = if cfg!(loom) { Self::MAX_STRIDE } else { 1 };

    /// `None` for a budget past the clock's range: no look at all.
    fn new(budget: Duration) -> Option<PassClock> {
        let now = Instant::now();
        Some(PassClock {
            deadline: now.checked_add(budget)?,
            looked_at: now,
            walked: 0,
            // The first entry tells what the entries cost.
            stride: Self::FIRST_STRIDE,
        })
    }

    /// How many entries may be walked before the next look (at least one).
    fn allowance(&self) -> usize {
        self.stride.saturating_sub(self.walked).max(1)
    }

    /// Looks at the clock once the stride is walked: `true` once the budget is spent. The next
    /// look comes before a quarter of what is left passes, at the pace of the entries since this.
    fn out_of_time(&mut self) -> bool {
        if self.walked < self.stride {
            return false;
        }
        let now = Instant::now();
        if now >= self.deadline {
            return true;
        }
        if !cfg!(loom) {
            let pace = (now - self.looked_at).as_nanos() / self.walked as u128;
            let stride = match pace {
                0 => Self::MAX_STRIDE as u128,
                pace => (self.deadline - now).as_nanos() / 4 / pace,
            };
            let most = (self.stride * 2).min(Self::MAX_STRIDE);
            self.stride = stride.clamp(1, most as u128) as usize;
        }
        (self.looked_at, self.walked) = (now, 0);
        false
    }

    /// A column begins: its checks may cost what the last column's did not.
    fn new_column(&mut self) {
        self.stride = Self::FIRST_STRIDE;
    }

    /// Where a part of the walk that starts at `key` ends, short of `block_end`: at the
    /// clock's allowance while the stride is under a block, else at the block's end (a look
    /// lands on a block's end then, and no block is cut in parts).
    fn part_end(&self, key: usize, block_end: usize) -> usize {
        match self.stride < BLOCK {
            true => block_end.min(key + self.allowance()),
            false => block_end,
        }
    }
}

pub(crate) struct Registry {
    incoming: Mutex<Incoming>,
    /// [`ARRIVED`]: `incoming` holds entries nobody has evaluated yet. [`ABANDON_DUE`]: the pump
    /// closed while this thread or another held the loop lock, perhaps in the middle of an
    /// evaluation, or a sweep held the registry, so the close could not empty it: the holder
    /// does, on letting go (of the loop lock, or the sweep of the registry). Read without a lock,
    /// so whoever lets go learns in one load whether anything is left to do.
    flags: AtomicUsize,
    slab: Mutex<Slab>,
    /// The block whose checks may be running ([`Place::block`]), or [`NO_BLOCK`].
    /// Written by the holder of the loop lock only.
    evaluating: AtomicU64,
    /// Passes (and evaluations of arrivals) ended so far: each told its ended entries first.
    passes_ended: AtomicU64,
    /// Entries marked cancelled and not yet removed (at least: a wait counts itself before it
    /// marks its entry).
    marked: AtomicUsize,
    /// [`marked`](Registry::marked) as the last sweep left it: entries among the arrivals,
    /// which a sweep does not reach ([`Registry::sweep_due`] counts from there).
    unswept: AtomicUsize,
    /// A wait gave up from inside a check (on the evaluating thread, so this pass's) since the
    /// block was announced: the block's later checks look at their marks too, else a wait in
    /// the same block as the check that dropped it could see its check called once more.
    /// Written and read by the holder of the loop lock only.
    withdrawn_inside: AtomicBool,
    /// Abandons under way ([`Registry::abandon`]): counted before one looks at anything, until
    /// it dropped what it took out, so [`Registry::abandoned`] waits for the drops of one that a
    /// pass's holder makes after the close has returned.
    abandoning: AtomicUsize,
    /// Notified as an abandon ends.
    abandon_ended: event_listener::Event,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            incoming: Mutex::default(),
            flags: AtomicUsize::new(0),
            slab: Mutex::default(),
            evaluating: AtomicU64::new(NO_BLOCK),
            passes_ended: AtomicU64::new(0),
            marked: AtomicUsize::new(0),
            unswept: AtomicUsize::new(0),
            withdrawn_inside: AtomicBool::new(false),
            abandoning: AtomicUsize::new(0),
            abandon_ended: event_listener::Event::new(),
        }
    }
}

impl Registry {
    /// Registers an entry not evaluated yet, in O(1); hands it back if the pump is closed.
    ///
    /// The caller found the loop lock busy: its holder evaluates the entry on letting go (or, past
    /// the check budget, the driver after it), so it needs no further run.
    pub(crate) fn insert(&self, entry: Entry) -> Result<(), Entry> {
        let mut incoming = lock(&self.incoming);
        if incoming.closed {
            return Err(entry);
        }
        incoming.entries.push(entry);
        self.flags.fetch_or(ARRIVED, SeqCst);
        Ok(())
    }

    /// Registers an entry that was just evaluated under the loop lock, which the caller still
    /// holds: nobody evaluates the slab meanwhile, so this does not wait.
    pub(crate) fn insert_evaluated<E: Evaluate>(&self, entry: E) -> Result<(), E> {
        let incoming = lock(&self.incoming);
        if incoming.closed {
            return Err(entry);
        }
        lock(&self.slab).insert(entry);
        Ok(())
    }

    /// What is left to do for whoever lets go of the loop lock.
    pub(crate) fn left_to_do(&self) -> LeftToDo {
        match self.flags.load(SeqCst) {
            flags if flags & ABANDON_DUE != 0 => LeftToDo::Abandon,
            flags if flags & ARRIVED != 0 => LeftToDo::Evaluate,
            _ => LeftToDo::Nothing,
        }
    }

    /// The pump closed while the loop lock was held on this thread: the lock's holder abandons
    /// the registry on letting go (see [`left_to_do`](Registry::left_to_do)).
    pub(crate) fn abandon_later(&self) {
        self.flags.fetch_or(ABANDON_DUE, SeqCst);
    }

    /// Moves the registered entries into the slab and returns it locked, with their places
    /// recorded in [`Slab::arrived`] if `record_places`.
    ///
    /// The incoming lock is held until the entries are in the slab, so a concurrent
    /// [`close`](Registry::close) finds them in one place or the other, never in transit.
    fn admit(&self, record_places: bool) -> MutexGuard<'_, Slab> {
        let mut incoming = lock(&self.incoming);
        let mut slab = lock(&self.slab);
        self.flags.fetch_and(!ARRIVED, SeqCst);
        // Most admissions move one or two entries: the vector is kept for the next arrivals.
        let mut entries = std::mem::take(&mut incoming.entries);
        for entry in entries.drain(..) {
            let place = entry.admit(&mut slab);
            if record_places {
                slab.arrived.push(place);
            }
        }
        keep_spare(&mut incoming.entries, entries);
        drop(incoming);
        slab
    }

    /// Evaluates the arrivals — the entries registered since the last evaluation, and those an
    /// evaluation of arrivals left for lack of time — only those, until none is left or `budget`
    /// is spent (`None`: no budget). Returns whether none is left; if some are, the caller asks
    /// the driver to go on ([`evaluate_rest`](Registry::evaluate_rest) does, with no run between).
    pub(crate) fn evaluate_arrivals(
        &self,
        budget: Option<Duration>,
        woken: &mut Vec<Waker>,
        removed: &mut Vec<Removed>,
    ) -> bool {
        let mut slab = self.admit(true);
        let mut pass = Pass::new(self, budget, woken);
        let seen_all = Self::arrivals(&mut slab, &mut pass);
        pass.end(&mut slab, removed);
        seen_all
    }

    /// The walk over the recorded arrivals, in place order, until none is left or the pass's
    /// budget is spent: returns whether none is left (the rest stay recorded).
    ///
    /// Each arrival's block is announced as the walk enters it, as a round's walk does, so a
    /// wait that gives up meanwhile waits for the checks of its own block at most, not for every
    /// arrival (a burst of waits that registered while a pass held the lock can be thousands).
    /// Every arrival is in the slab, its place recorded, before the first announcement: a wait
    /// that sees its block announced sees its place too. In place order, so the arrivals of one
    /// block share one announcement.
    ///
    /// An arrival left for later may have been swept (its wait gave up) before the walk comes
    /// back to it, and its key given to another entry since: the walk then checks that entry
    /// once more, with no run between (its check says what it said; a mark is looked at as
    /// anywhere), or finds the key empty, or past its column's end. A round's start forgets the
    /// arrivals left: its walk sees them.
    fn arrivals(slab: &mut Slab, pass: &mut Pass<'_>) -> bool {
        if slab.arrived.is_empty() {
            return true;
        }
        let mut places = std::mem::take(&mut slab.arrived);
        places.sort_unstable_by_key(|place| place.packed());
        places.dedup_by_key(|place| place.packed());
        let (mut announced, mut column, mut seen) = (NO_BLOCK, u32::MAX, 0);
        for place in &places {
            if let Some(clock) = &mut pass.clock {
                if place.column != column {
                    column = place.column;
                    clock.new_column();
                }
                if clock.out_of_time() {
                    break;
                }
                clock.walked += 1;
            }
            if place.block() != announced {
                announced = place.block();
                pass.announce(announced);
            }
            slab.columns[place.column as usize].evaluate_key(place.key, pass);
            seen += 1;
        }
        places.drain(..seen);
        if places.is_empty() {
            keep_spare(&mut slab.arrived, places);
            return true;
        }
        slab.arrived = places;
        false
    }

    /// A run (of round `round`) just happened: starts its round, unless one is still being
    /// walked — then that one goes on, and this one begins as soon as it ends — and evaluates
    /// entries, from where the last pass stopped, until every round is walked through or
    /// `budget` is spent. The wakers of the completed ones go to `woken`, the entries taken out
    /// to `removed`. If not walked through, [`evaluate_rest`](Registry::evaluate_rest) goes on
    /// with it, with no run between.
    pub(crate) fn evaluate(
        &self,
        budget: Duration,
        round: u64,
        woken: &mut Vec<Waker>,
        removed: &mut Vec<Removed>,
    ) -> Walked {
        let mut slab = self.admit(false);
        slab.latest = slab.latest.max(round);
        match slab.walking {
            None => Self::begin_round(&mut slab, false),
            Some(_) => slab.columns.iter_mut().for_each(|column| column.run_came()),
        }
        let mut pass = Pass::new(self, Some(budget), woken);
        let (left, checked) = Self::walk_rounds(&mut slab, &mut pass);
        pass.end(&mut slab, removed);
        Walked {
            seen_all: !left,
            checked,
        }
    }

    /// Begins the latest run's round: every entry the columns hold is to be evaluated again —
    /// but, `after_its_run`, those the round that just ended evaluated after that run.
    fn begin_round(slab: &mut Slab, after_its_run: bool) {
        // Arrivals left for lack of time are in the slab: a whole round sees them. One that
        // skips what was walked after its run may skip one: they stay left for the arrivals'
        // pass.
        if !after_its_run {
            let mut left = std::mem::take(&mut slab.arrived);
            left.clear();
            keep_spare(&mut slab.arrived, left);
        }
        for column in &mut slab.columns {
            column.begin_round(after_its_run);
        }
        slab.walking = Some(slab.latest);
    }

    /// Walks the round under way, and the latest run's after it if that is a later one, until
    /// both are walked through (`false`) or the pass's time is up (`true`: entries left); with
    /// the latest round walked through in this pass, if any.
    fn walk_rounds(slab: &mut Slab, pass: &mut Pass<'_>) -> (bool, Option<u64>) {
        let mut checked = None;
        while let Some(walking) = slab.walking {
            if !Self::pass(slab, pass) {
                return (true, checked);
            }
            checked = Some(walking);
            slab.walking = None;
            // A later run came during the walk, and marked where it came.
            if slab.latest > walking {
                Self::begin_round(slab, true);
            }
        }
        (false, checked)
    }

    /// Goes on with what passes left for lack of time, with no run between (the C library has
    /// not run since, so the checks already made would say the same): first the entries of the
    /// rounds not seen yet, then the arrivals — those left, and any registered since — until
    /// none is left or `budget` is spent. Returns what is still left.
    ///
    /// The rounds first: each is finite (its walk stays within the keys it began with), so a
    /// stream of arrivals whose checks spend the budget cannot keep it from ending, nor the
    /// waits in it whose condition held at the run from being woken.
    pub(crate) fn evaluate_rest(
        &self,
        budget: Duration,
        woken: &mut Vec<Waker>,
        removed: &mut Vec<Removed>,
    ) -> Left {
        let mut slab = self.admit(true);
        let mut pass = Pass::new(self, Some(budget), woken);
        let (round, checked) = Self::walk_rounds(&mut slab, &mut pass);
        let arrivals = match round {
            true => !slab.arrived.is_empty(),
            false => !Self::arrivals(&mut slab, &mut pass),
        };
        pass.end(&mut slab, removed);
        Left {
            arrivals,
            round,
            checked,
        }
    }

    /// The columns in turn from where the last pass stopped, each with what it has left of the
    /// round.
    fn pass(slab: &mut Slab, pass: &mut Pass<'_>) -> bool {
        let columns = slab.columns.len();
        if columns == 0 {
            return true;
        }
        let first = slab.next_column % columns;
        let mut seen_all = true;
        for column in (first..columns).chain(0..first) {
            if !slab.columns[column].evaluate(pass) {
                slab.next_column = column;
                seen_all = false;
                break;
            }
        }
        seen_all
    }

    /// Says which block of entries may have checks running from now on; returns whether any
    /// entry is marked cancelled, in which case the checks of the block must look at their marks.
    ///
    /// A wait that saw an earlier announcement marked its entry (and counted it) before its
    /// fence, so after this fence the count and the mark are visible here.
    fn announce(&self, block: u64) -> bool {
        // A wait given up inside the last block is counted in `marked`, read below.
        self.withdrawn_inside.store(false, Relaxed);
        // Release: a wait that sees the next block also sees the checks of this one ended.
        self.evaluating.store(block, Release);
        if block == NO_BLOCK {
            // Release: a wait that sees the count go up sees what the pass finished.
            self.passes_ended.fetch_add(1, Release);
        }
        fence(SeqCst);
        self.marked.load(Relaxed) > 0
    }

    /// Gives up the entry whose wait holds `mark`: once this returns, its check never runs
    /// again, and the registry drops the entry when it next meets it.
    ///
    /// May wait for the evaluator to leave the entry's block (at most [`BLOCK`] checks), except
    /// when `inside_evaluation`: called from a check on the evaluating thread, which looks at the
    /// mark before any later check.
    pub(crate) fn withdraw(&self, mark: &Mark, inside_evaluation: bool) {
        // Counted before marked, so the count never falls behind the marks.
        self.marked.fetch_add(1, Relaxed);
        if mark
            .state
            .compare_exchange(PENDING, CANCELLED, AcqRel, Acquire)
            .is_err()
        {
            // Finished: its check already ran for the last time.
            self.unmark(1);
            return;
        }
        fence(SeqCst);
        match inside_evaluation {
            true => self.withdrawn_inside.store(true, Relaxed),
            false => self.wait_out(&mark.place),
        }
    }

    /// Returns once the pass under way, if any, has ended (not waiting for passes after it):
    /// every entry whose check ended in it has been finished ([`Evaluate::finish`] comes after
    /// the walk of its column, not inside its block).
    pub(crate) fn wait_pass_out(&self) {
        // The count first: if a pass is under way after it, that pass's end counts.
        let ended = self.passes_ended.load(Acquire);
        if self.evaluating.load(Acquire) == NO_BLOCK {
            return;
        }
        let mut step = 0;
        while self.passes_ended.load(Acquire) == ended {
            spin_step(&mut step);
        }
    }

    /// Uncounts `n` marks: their entries left the slab, or their waits found them finished.
    /// What the last sweep left cannot be more than the marks left: a pass that took those
    /// arrivals out lowers it too, or the next sweep would wait for that many more marks.
    fn unmark(&self, n: usize) {
        if n > 0 {
            let left = self.marked.fetch_sub(n, Relaxed).wrapping_sub(n);
            self.unswept.fetch_min(left, Relaxed);
        }
    }

    /// Returns once no check of the entry stored at `place` runs or will run, given that its
    /// wait marked it cancelled and fenced before.
    fn wait_out(&self, place: &AtomicU64) {
        let mut step = 0;
        loop {
            let block = self.evaluating.load(Acquire);
            let place = place.load(Acquire);
            let running = match block {
                NO_BLOCK => false,
                block => place != NOT_ADMITTED && Place::unpacked(place).block() == block,
            };
            if !running {
                return;
            }
            while self.evaluating.load(Acquire) == block {
                spin_step(&mut step);
            }
        }
    }

    /// Whether the entries of waits that gave up call for a sweep: [`SWEEP_AT`] or more marked
    /// beyond what the last sweep left (those among the arrivals, which only a pass takes out),
    /// and more than the `pending` waits. For a wait that just gave up, which then asks the
    /// driver ([`Demand::sweep`](crate::core::Demand::sweep)): a pump that makes no run for a
    /// while (a loop that says nothing is due, one wait keeping it from going idle) would
    /// otherwise keep every given-up check, and what it captured, until its next run. Counted
    /// against the live waits and what the last sweep left, a sweep's walk costs about two
    /// entries per wait that gave up.
    pub(crate) fn sweep_due(&self, pending: usize) -> bool {
        let marked = self.marked.load(Relaxed);
        let left = self.unswept.load(Relaxed);
        marked >= left.saturating_add(SWEEP_AT) && marked >= pending
    }

    /// Takes out the entries of waits that gave up: for a pump going idle, which evaluates
    /// nothing until the next wait, and when [`sweep_due`](Registry::sweep_due). The driver's
    /// (what the checks captured is dropped here, as after a pass).
    ///
    /// Only the slab: an arrival is left where it is, for the holder of the loop lock (or the
    /// wait itself) to evaluate. Admitting it here would clear [`ARRIVED`] without evaluating
    /// it, and a wait that counted itself just after the driver found the pump idle, while
    /// another check held the lock, would then wait for a run a hinted pump may never make.
    pub(crate) fn sweep(&self, pump: usize) {
        let mut removed = Vec::new();
        let mut slab = lock(&self.slab);
        let swept = slab.columns.iter_mut().map(|c| c.sweep()).sum();
        slab.take_removed(&mut removed);
        drop(slab);
        self.unmark(swept);
        // Marked but not in the slab (among the arrivals): a pass takes them out, not a sweep.
        self.unswept.store(self.marked.load(Relaxed), Relaxed);
        // A pass that uncounted marks between that load and the store lowered `unswept` before
        // it: lowered again here, or the next sweep would wait for that many more.
        self.unswept.fetch_min(self.marked.load(Relaxed), Relaxed);
        drop_removed(removed);
        // A close that found the slab busy left emptying it to its holder (see `abandon`):
        // this sweep, which holds no loop lock whose guard would look.
        fence(SeqCst);
        if self.left_to_do() == LeftToDo::Abandon {
            self.abandon(pump);
        }
    }

    /// Refuses new entries, takes every entry out and wakes their waits, which will never
    /// complete: the pump closed. Wakes and drops with no lock held.
    ///
    /// Never waits for the slab: a pass holds it while it runs checks, which may wait for the
    /// very thread that closes the pump (`close` never waits, the crate docs promise). A busy
    /// slab is left to its holder, which looks at [`left_to_do`](Registry::left_to_do) once it
    /// let go — a pass as its loop lock's guard lets go, a sweep itself — and then finds the
    /// slab free; its waits end as the pass does, as they did when the close waited for it.
    pub(crate) fn abandon(&self, pump: usize) {
        // Counted before the flag is cleared below: `abandoned` never sees neither.
        self.abandoning.fetch_add(1, SeqCst);
        let mut removed: Vec<Removed> = Vec::new();
        let arrived = {
            let mut incoming = lock(&self.incoming);
            incoming.closed = true;
            self.flags.store(0, SeqCst);
            std::mem::take(&mut incoming.entries)
        };
        let mut wakers: Vec<Waker> = arrived.iter().filter_map(|entry| entry.abandon()).collect();
        let slab = try_lock(&self.slab).or_else(|| {
            // Set, then look again, against the holder's letting go, then looking: with a fence
            // between each side's write and read, one of the two sees the other's.
            self.flags.fetch_or(ABANDON_DUE, SeqCst);
            fence(SeqCst);
            let slab = try_lock(&self.slab)?;
            self.flags.fetch_and(!ABANDON_DUE, SeqCst);
            Some(slab)
        });
        if let Some(mut slab) = slab {
            slab.arrived = Vec::new();
            for column in &mut slab.columns {
                wakers.extend(column.abandon());
            }
            slab.take_removed(&mut removed);
        }
        for waker in wakers {
            waker.wake();
        }
        {
            // Inside the pump (`pump` is its id), as its loop's drop is: a capture's `Drop`
            // that waits for the close — `closed()`, which waits for this very abandon, or a
            // turn — is refused, not deadlocked (a probe hung `close()` so, 10 of 10).
            let _inside = crate::reentry::Inside::enter(pump);
            crate::unwind::drop_each_caught(arrived);
            drop_removed(removed);
        }
        self.abandoning.fetch_sub(1, SeqCst);
        self.abandon_ended.notify(usize::MAX);
    }

    /// Waits until the registry was abandoned and what its entries captured is dropped: no
    /// abandon under way, and none left to a holder ([`ABANDON_DUE`]). For
    /// [`Pump::closed`](crate::Pump::closed), after a close.
    pub(crate) async fn abandoned(&self) {
        loop {
            let ended = self.abandon_ended.listen();
            if self.is_abandoned() {
                return;
            }
            ended.await;
        }
    }

    fn is_abandoned(&self) -> bool {
        // Closed by the first abandon, which counted itself first.
        lock(&self.incoming).closed
            && self.abandoning.load(SeqCst) == 0
            && self.flags.load(SeqCst) & ABANDON_DUE == 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};
    use std::task::Waker;
    use std::time::Duration;

    use super::{Entry, Evaluate, Evaluated, Finished, Registry};

    /// An entry that counts its evaluations and never finishes.
    struct Probe {
        id: usize,
        counts: Arc<Mutex<Vec<u32>>>,
    }

    impl Evaluate for Probe {
        type Checked = ();

        fn evaluate(&mut self, _: bool) -> Evaluated<()> {
            self.counts.lock().unwrap()[self.id] += 1;
            Evaluated::Pending
        }

        fn finish(&self, (): ()) -> Finished {
            unreachable!("a probe's check never ends its wait")
        }

        fn is_cancelled(&self) -> bool {
            false
        }

        fn abandon(&self) -> Option<Waker> {
            None
        }

        fn stored_at(&self, _: u64) {}
    }

    fn arrive(registry: &Registry, counts: &Arc<Mutex<Vec<u32>>>, ids: std::ops::Range<usize>) {
        counts.lock().unwrap().resize(ids.end, 0);
        for id in ids {
            let entry: Entry = Box::new(Probe {
                id,
                counts: counts.clone(),
            });
            assert!(registry.insert(entry).is_ok());
        }
        assert!(registry.evaluate_arrivals(None, &mut Vec::new(), &mut Vec::new()));
    }

    /// One round after a run, cut by its budget, with entries arriving between its passes:
    /// every entry there when the round began is evaluated exactly once in it.
    fn round_with_arrivals(registry: &Registry, counts: &Arc<Mutex<Vec<u32>>>, arrivals: usize) {
        let before = counts.lock().unwrap().len();
        counts
            .lock()
            .unwrap()
            .iter_mut()
            .for_each(|count| *count = 0);
        // A zero budget: the pass stops at its first look at the clock.
        assert!(
            !registry
                .evaluate(Duration::ZERO, 1, &mut Vec::new(), &mut Vec::new())
                .seen_all
        );
        arrive(registry, counts, before..before + arrivals);
        while (registry.evaluate_rest(Duration::from_secs(1), &mut Vec::new(), &mut Vec::new()))
            .round
        {}
        let counts = counts.lock().unwrap();
        let wrong: Vec<_> = (0..before).filter(|&id| counts[id] != 1).collect();
        assert!(
            wrong.is_empty(),
            "{} of {before} entries not evaluated exactly once in the round (first: {:?})",
            wrong.len(),
            wrong.first()
        );
    }

    /// The capacities of the vectors an admission of arrivals keeps: the incoming list's and
    /// the places'.
    fn kept_for_arrivals(registry: &Registry) -> (usize, usize) {
        let incoming = super::lock(&registry.incoming).entries.capacity();
        (incoming, super::lock(&registry.slab).arrived.capacity())
    }

    #[test]
    fn arrivals_reuse_their_vectors_but_a_burst_does_not_keep_its_memory() {
        let registry = Registry::default();
        let counts = Arc::new(Mutex::new(Vec::new()));
        arrive(&registry, &counts, 0..3);
        let (incoming, places) = kept_for_arrivals(&registry);
        assert!(incoming >= 3 && places >= 3, "kept: {incoming}, {places}");
        let memory = |registry: &Registry| {
            let incoming = super::lock(&registry.incoming).entries.as_ptr() as usize;
            (
                incoming,
                super::lock(&registry.slab).arrived.as_ptr() as usize,
            )
        };
        let before = memory(&registry);
        arrive(&registry, &counts, 3..6);
        assert_eq!(memory(&registry), before, "the next arrivals reuse them");
        arrive(&registry, &counts, 6..7 + super::SPARE_AT_MOST);
        let (incoming, places) = kept_for_arrivals(&registry);
        assert!(
            incoming <= super::SPARE_AT_MOST && places <= super::SPARE_AT_MOST,
            "kept past the bound: {incoming}, {places}"
        );
        assert!(counts.lock().unwrap().iter().all(|&count| count == 1));
    }

    #[test]
    fn a_round_cut_short_sees_each_entry_once_however_the_column_grows() {
        let registry = Registry::default();
        let counts = Arc::new(Mutex::new(Vec::new()));
        arrive(&registry, &counts, 0..600);
        round_with_arrivals(&registry, &counts, 400);
        round_with_arrivals(&registry, &counts, 100);
        round_with_arrivals(&registry, &counts, 0);
    }

    /// Arrivals a zero budget cut short are left recorded: going on evaluates each once, and a
    /// round that starts meanwhile sees them in its walk instead (once too).
    #[test]
    fn arrivals_left_for_lack_of_time_are_each_evaluated_once() {
        let zero = Some(Duration::ZERO);
        let registry = Registry::default();
        let counts = Arc::new(Mutex::new(vec![0; 200]));
        let arrive = |ids: std::ops::Range<usize>| {
            for id in ids {
                let counts = counts.clone();
                assert!(registry.insert(Box::new(Probe { id, counts })).is_ok());
            }
        };
        arrive(0..100);
        // The stride starts at one entry: a zero budget lets one check through.
        assert!(!registry.evaluate_arrivals(zero, &mut Vec::new(), &mut Vec::new()));
        arrive(100..150);
        let left = registry.evaluate_rest(Duration::from_secs(1), &mut Vec::new(), &mut Vec::new());
        assert!(!left.arrivals && !left.round, "{left:?}");
        assert!(counts.lock().unwrap()[..150]
            .iter()
            .all(|&count| count == 1));

        arrive(150..200);
        assert!(!registry.evaluate_arrivals(zero, &mut Vec::new(), &mut Vec::new()));
        counts
            .lock()
            .unwrap()
            .iter_mut()
            .for_each(|count| *count = 0);
        assert!(
            registry
                .evaluate(Duration::from_secs(1), 1, &mut Vec::new(), &mut Vec::new())
                .seen_all
        );
        let left = registry.evaluate_rest(Duration::from_secs(1), &mut Vec::new(), &mut Vec::new());
        assert!(!left.arrivals && !left.round, "{left:?}");
        assert!(
            counts.lock().unwrap().iter().all(|&count| count == 1),
            "the round saw every entry once, and the arrivals left were forgotten"
        );
    }

    /// Going on after a cut serves the round before the arrivals: one arrival per call that
    /// spends the budget cannot keep the round from ending (found by review: with the arrivals
    /// first, the round never moved).
    #[test]
    fn arrivals_cannot_starve_the_rest_of_a_round() {
        let zero = Duration::ZERO;
        let registry = Registry::default();
        let counts = Arc::new(Mutex::new(Vec::new()));
        arrive(&registry, &counts, 0..10);
        // A zero budget: each pass checks one entry, then looks at the clock and stops.
        assert!(
            !registry
                .evaluate(zero, 1, &mut Vec::new(), &mut Vec::new())
                .seen_all
        );
        let mut calls = 0;
        for id in 10..60 {
            counts.lock().unwrap().resize(id + 1, 0);
            let counts = counts.clone();
            assert!(registry.insert(Box::new(Probe { id, counts })).is_ok());
            calls += 1;
            if !registry
                .evaluate_rest(zero, &mut Vec::new(), &mut Vec::new())
                .round
            {
                break;
            }
        }
        assert!(calls < 50, "the round never ended");
        assert!(counts.lock().unwrap()[..10].iter().all(|&count| count == 2));
    }

    /// A burst of arrivals left for later gives its memory back once a round forgets them.
    #[test]
    fn a_burst_left_for_later_does_not_keep_its_memory_past_a_round() {
        let registry = Registry::default();
        let counts = Arc::new(Mutex::new(vec![0; 2 * super::SPARE_AT_MOST]));
        for id in 0..2 * super::SPARE_AT_MOST {
            let counts = counts.clone();
            assert!(registry.insert(Box::new(Probe { id, counts })).is_ok());
        }
        let zero = Some(Duration::ZERO);
        assert!(!registry.evaluate_arrivals(zero, &mut Vec::new(), &mut Vec::new()));
        assert!(
            registry
                .evaluate(Duration::from_secs(1), 1, &mut Vec::new(), &mut Vec::new())
                .seen_all
        );
        let (_, places) = kept_for_arrivals(&registry);
        assert!(places <= super::SPARE_AT_MOST, "kept {places} places");
    }

    /// Marks a sweep cannot take out (entries among the arrivals) do not call for the next one:
    /// only [`super::SWEEP_AT`] more beyond them do (found by review: every wait that gave up
    /// would have walked the slab again for nothing).
    #[test]
    fn a_sweep_is_due_for_marks_beyond_what_the_last_one_left() {
        let registry = Registry::default();
        registry.marked.store(2 * super::SWEEP_AT, SeqCst);
        assert!(registry.sweep_due(0));
        registry.sweep(0);
        assert!(
            !registry.sweep_due(0),
            "nothing it could take out came since"
        );
        registry.marked.fetch_add(super::SWEEP_AT, SeqCst);
        assert!(registry.sweep_due(0));
        assert!(
            !registry.sweep_due(4 * super::SWEEP_AT),
            "fewer than the live waits"
        );
        registry.marked.store(0, SeqCst);
    }

    /// What a sweep left among the arrivals and a pass took out since no longer counts against
    /// the next sweep (found by review: a burst of given-up arrivals raised the bar for good).
    #[test]
    fn marks_a_pass_took_out_no_longer_hold_off_a_sweep() {
        let registry = Registry::default();
        registry.marked.store(4 * super::SWEEP_AT, SeqCst);
        registry.sweep(0); // nothing in the slab: all four thousand are left to a pass
        registry.unmark(4 * super::SWEEP_AT); // which takes them out
        registry.marked.fetch_add(super::SWEEP_AT, SeqCst);
        assert!(registry.sweep_due(0), "due for the new marks");
        registry.marked.store(0, SeqCst);
    }

    /// An entry that never finishes, counts its checks, and gives up when told.
    struct GivesUp {
        gave_up: Arc<AtomicBool>,
        checks: Arc<AtomicUsize>,
    }

    impl Evaluate for GivesUp {
        type Checked = ();

        fn evaluate(&mut self, _: bool) -> Evaluated<()> {
            self.checks.fetch_add(1, SeqCst);
            Evaluated::Pending
        }

        fn finish(&self, (): ()) -> Finished {
            unreachable!("its check never ends its wait")
        }

        fn is_cancelled(&self) -> bool {
            self.gave_up.load(SeqCst)
        }

        fn abandon(&self) -> Option<Waker> {
            None
        }

        fn stored_at(&self, _: u64) {}
    }

    /// Arrivals left for later whose waits gave up and were swept, their column's memory given
    /// back, then fewer arrivals of the same type: the places left reach past the column's end.
    /// Nothing to check there, no panic, and the new arrivals are each checked once.
    #[test]
    fn arrivals_left_then_swept_are_passed_over() {
        let registry = Registry::default();
        let (old, new) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let checks = Arc::new(AtomicUsize::new(0));
        let arrive = |n: usize, gave_up: &Arc<AtomicBool>| {
            for _ in 0..n {
                let (gave_up, checks) = (gave_up.clone(), checks.clone());
                assert!(registry
                    .insert(Box::new(GivesUp { gave_up, checks }))
                    .is_ok());
            }
        };
        arrive(100, &old);
        assert!(!registry.evaluate_arrivals(
            Some(Duration::ZERO),
            &mut Vec::new(),
            &mut Vec::new()
        ));
        let checked = checks.load(SeqCst);
        assert!(checked < 100, "the budget cut the walk short");
        old.store(true, SeqCst);
        registry.sweep(0);
        arrive(10, &new);
        let left = registry.evaluate_rest(Duration::from_secs(1), &mut Vec::new(), &mut Vec::new());
        assert!(!left.arrivals && !left.round, "{left:?}");
        assert_eq!(
            checks.load(SeqCst),
            checked + 10,
            "each new arrival checked once"
        );
    }

    /// An entry that finishes at its first evaluation and counts its drops.
    struct Finishes(Arc<AtomicUsize>);

    impl Evaluate for Finishes {
        type Checked = ();

        fn evaluate(&mut self, _: bool) -> Evaluated<()> {
            Evaluated::Checked(())
        }

        fn finish(&self, (): ()) -> Finished {
            Finished {
                waker: None,
                marked: false,
            }
        }

        fn is_cancelled(&self) -> bool {
            false
        }

        fn abandon(&self) -> Option<Waker> {
            None
        }

        fn stored_at(&self, _: u64) {}
    }

    impl Drop for Finishes {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    #[test]
    fn finished_entries_are_dropped_once_each_by_the_caller_batch_after_batch() {
        let registry = Registry::default();
        let drops = Arc::new(AtomicUsize::new(0));
        for batch in 1..=3 {
            for _ in 0..300 {
                let entry: Entry = Box::new(Finishes(drops.clone()));
                assert!(registry.insert(entry).is_ok());
            }
            let mut removed = Vec::new();
            assert!(registry.evaluate_arrivals(None, &mut Vec::new(), &mut removed));
            assert_eq!(
                drops.load(SeqCst),
                300 * (batch - 1),
                "none dropped under the lock"
            );
            super::drop_removed(removed);
            assert_eq!(
                drops.load(SeqCst),
                300 * batch,
                "each dropped once by the caller"
            );
        }
    }
}
