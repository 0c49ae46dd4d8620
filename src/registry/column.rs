//! A column of the registry: the entries of one check type, stored inline in one vector, so the
//! pump's pass over them is a monomorphic loop over contiguous memory (no box, no virtual call,
//! no lock per check).

use std::any::Any;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::Waker;

use super::{keep_spare, Batch, Evaluate, Evaluated, Finished, Pass, PassClock, Place, Removed};
use crate::sync::{lock, Mutex};
use crate::unwind::drop_each_caught;

// A block's slots are one word of `Typed::occupied`.
const _: () = assert!(super::BLOCK == u64::BITS as usize);

/// How many ended entries ahead of the one being finished have their shared state fetched.
const FINISH_AHEAD: usize = 32;

/// What a column is to the registry, whatever its entry type.
pub(super) trait Column: Send {
    /// Starts a round: every entry is to be evaluated again — but, with `after_its_run`, those
    /// the last round evaluated after the run this one is for (since [`run_came`]), which are
    /// not evaluated twice.
    ///
    /// [`run_came`]: Column::run_came
    fn begin_round(&mut self, after_its_run: bool);

    /// A run came while a round was being walked: what the round has left of this column from
    /// here on is evaluated after that run.
    fn run_came(&mut self);

    /// Evaluates the entries not yet evaluated this round, from where the last pass stopped,
    /// until none is left (`true`) or the pass's time is up (`false`).
    fn evaluate(&mut self, pass: &mut Pass<'_>) -> bool;

    /// Evaluates the entry under `key` only, if there is one (there may be none: see
    /// [`Registry::arrivals`](super::Registry::arrivals)).
    fn evaluate_key(&mut self, key: usize, pass: &mut Pass<'_>);

    /// Removes the entries whose wait gave up; how many.
    fn sweep(&mut self) -> usize;

    /// Empties the column, returning the wakers of its waits, which will never complete.
    fn abandon(&mut self) -> Vec<Waker>;

    /// The entries removed since the last call, to be dropped once no lock is held (what a
    /// check captured may run user code on drop).
    fn take_removed(&mut self) -> Option<Removed>;

    fn as_any(&mut self) -> &mut dyn Any;
}

/// The column of entries of type `E`.
pub(super) struct Typed<E: Evaluate> {
    index: u32,
    entries: Vec<Option<E>>,
    /// A bit per key, set while its slot holds an entry, a word per block of
    /// [`BLOCK`](super::BLOCK) keys: a pass visits the entries only, however many slots the
    /// waits that finished left empty.
    occupied: Vec<u64>,
    free: Vec<usize>,
    len: usize,
    /// Where the next pass starts: where the last one stopped for lack of time, or, once a
    /// round is done, where it began (so each round starts where the last began).
    cursor: usize,
    /// Keys this round has yet to visit, from `cursor` on.
    left: usize,
    /// How many keys the column had when the round began: keys stored since were evaluated as
    /// they arrived, and the round's walk stays within these.
    round_size: usize,
    /// `left` when the latest run came while this round was walked ([`Column::run_came`]).
    left_at_run: Option<usize>,
    removed: Vec<E>,
    /// The entries of `removed` (by index) that their checks ended this pass, with what the
    /// checks gave, until [`Typed::finish_checked`] tells their waits.
    checked: Vec<(usize, E::Checked)>,
    /// The memory of the last batch of removed entries, given back once they were dropped.
    spare: Arc<Mutex<Vec<E>>>,
}

impl<E: Evaluate> Typed<E> {
    pub(super) fn new(index: u32) -> Self {
        Typed {
            index,
            entries: Vec::new(),
            occupied: Vec::new(),
            free: Vec::new(),
            len: 0,
            cursor: 0,
            left: 0,
            round_size: 0,
            left_at_run: None,
            removed: Vec::new(),
            checked: Vec::new(),
            spare: Arc::default(),
        }
    }

    /// Stores `entry`, telling it where.
    pub(super) fn insert(&mut self, entry: E) -> Place {
        self.len += 1;
        let key = match self.free.pop() {
            Some(key) => {
                self.entries[key] = Some(entry);
                key
            }
            None => {
                self.entries.push(Some(entry));
                self.entries.len() - 1
            }
        };
        if self.occupied.len() <= key / super::BLOCK {
            self.occupied.resize(key / super::BLOCK + 1, 0);
        }
        self.occupied[key / super::BLOCK] |= 1 << (key % super::BLOCK);
        let place = Place::new(self.index, key);
        if let Some(entry) = &self.entries[key] {
            entry.stored_at(place.packed());
        }
        place
    }

    fn remove(&mut self, key: usize) -> Option<E> {
        vacate(
            &mut self.entries[key],
            key,
            &mut self.occupied[key / super::BLOCK],
            &mut self.free,
            &mut self.len,
        )
    }

    /// The pass's loop over the keys `from..to`, all in one announced block: the occupied slots
    /// only, found from the block's word of [`Typed::occupied`], the finished ones taken out of
    /// line.
    #[inline(always)]
    fn evaluate_block(&mut self, from: usize, to: usize, look_for_mark: bool, pass: &mut Pass<'_>) {
        debug_assert!(from < to && (to - 1) / super::BLOCK == from / super::BLOCK);
        let Typed {
            entries,
            occupied,
            free,
            len,
            removed,
            checked,
            ..
        } = self;
        let Some(word) = occupied.get_mut(from / super::BLOCK) else {
            return;
        };
        let slots = &mut entries[from..to];
        let withdrawn_inside = pass.withdrawn_inside();
        // The bits of `from..to`, shifted down to bit 0.
        let bits = (*word >> (from % super::BLOCK)) & (u64::MAX >> (super::BLOCK - slots.len()));
        if bits.count_ones() as usize == slots.len() {
            // Every slot holds an entry: walked in place, the loop the compiler does best.
            for (slot, key) in slots.iter_mut().zip(from..) {
                let Some(entry) = slot else {
                    continue;
                };
                match entry.evaluate(look_for_mark || withdrawn_inside.load(Relaxed)) {
                    Evaluated::Pending => {}
                    ended => retire(slot, key, word, free, len, removed, checked, ended, pass),
                }
            }
            return;
        }
        let mut bits = bits;
        while bits != 0 {
            let offset = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let slot = &mut slots[offset];
            let Some(entry) = slot else {
                continue;
            };
            match entry.evaluate(look_for_mark || withdrawn_inside.load(Relaxed)) {
                Evaluated::Pending => {}
                ended => {
                    let key = from + offset;
                    retire(slot, key, word, free, len, removed, checked, ended, pass);
                }
            }
        }
    }

    /// Tells the waits of the entries this pass's checks ended: their shared states all
    /// fetched first, then each finished (see [`Evaluate::prefetch`]).
    fn finish_checked(&mut self, pass: &mut Pass<'_>) {
        let Typed {
            removed, checked, ..
        } = self;
        // Finished in the order they ended, popped from the end; each state is fetched a window
        // ahead of its finish, so it is still in cache then, however many the pass ended.
        checked.reverse();
        for &(at, _) in checked.iter().rev().take(FINISH_AHEAD) {
            removed[at].prefetch();
        }
        while let Some((at, value)) = checked.pop() {
            if let Some(&(ahead, _)) = checked
                .len()
                .checked_sub(FINISH_AHEAD)
                .and_then(|i| checked.get(i))
            {
                removed[ahead].prefetch();
            }
            let Finished { waker, marked } = removed[at].finish(value);
            pass.woken.extend(waker);
            pass.unmarked += usize::from(marked);
        }
    }

    /// The walk of [`Column::evaluate`], its ended entries not yet finished.
    fn walk(&mut self, pass: &mut Pass<'_>) -> bool {
        if self.len == 0 {
            self.shrink_if_empty();
            return true;
        }
        // Keys stored since the round began were evaluated as they arrived: the walk stays
        // within the keys the column had then, so growth between passes cannot use up `left`.
        let size = self.round_size.min(self.entries.len());
        if size == 0 {
            self.left = 0;
            return true;
        }
        let left = self.left.min(size);
        let start = self.cursor % size;
        // In key order from `start`, wrapping at most once, a block (or what the pass's clock
        // allows of one) at a time: each is announced as it is entered, and the pass's clock
        // looked at between them.
        let first = (size - start).min(left);
        let mut step = 0;
        if let Some(clock) = &mut pass.clock {
            clock.new_column();
        }
        for (from, count) in [(start, first), (0, left - first)] {
            let (mut key, end) = (from, from + count);
            while key < end {
                if pass.clock.as_mut().is_some_and(PassClock::out_of_time) {
                    self.cursor = key;
                    self.left = left - step;
                    return false;
                }
                let block_end = ((key / super::BLOCK + 1) * super::BLOCK).min(end);
                let block_end = match &pass.clock {
                    Some(clock) => clock.part_end(key, block_end),
                    None => block_end,
                };
                let look_for_marks = pass.announce(Place::new(self.index, key).block());
                self.evaluate_block(key, block_end, look_for_marks, pass);
                if let Some(clock) = &mut pass.clock {
                    clock.walked += block_end - key;
                }
                step += block_end - key;
                key = block_end;
            }
        }
        self.cursor = (start + left) % size;
        self.left = 0;
        true
    }

    /// Gives back the memory of a past burst of waits once none is left.
    fn shrink_if_empty(&mut self) {
        if self.len == 0 && !self.entries.is_empty() {
            self.entries = Vec::new();
            self.occupied = Vec::new();
            self.free = Vec::new();
            self.checked = Vec::new();
            *lock(&self.spare) = Vec::new();
            self.cursor = 0;
            self.left = 0;
            self.round_size = 0;
            self.left_at_run = None;
        }
    }
}

impl<E: Evaluate> Column for Typed<E> {
    fn begin_round(&mut self, after_its_run: bool) {
        let size = self.entries.len();
        // The keys from `cursor` on were walked after the run (the last round's remainder), the
        // rest before it: the round walks the rest, from `cursor`. Only while the keys are where
        // they were — a column that grew walks them all.
        let walked = match self.left_at_run.take() {
            Some(left) if after_its_run && self.round_size == size => left,
            _ => 0,
        };
        self.round_size = size;
        self.left = size - walked;
    }

    fn run_came(&mut self) {
        self.left_at_run = Some(self.left);
    }

    fn evaluate(&mut self, pass: &mut Pass<'_>) -> bool {
        let seen_all = self.walk(pass);
        self.finish_checked(pass);
        seen_all
    }

    fn evaluate_key(&mut self, key: usize, pass: &mut Pass<'_>) {
        // An arrival left for later whose column emptied and shrank since.
        if key >= self.entries.len() {
            return;
        }
        let look_for_mark = pass.look_for_marks;
        self.evaluate_block(key, key + 1, look_for_mark, pass);
        self.finish_checked(pass);
    }

    fn sweep(&mut self) -> usize {
        let mut swept = 0;
        // The occupied slots only: the slots a burst of finished waits left empty cost a word
        // per block.
        for block in 0..self.occupied.len() {
            let mut bits = self.occupied[block];
            while bits != 0 {
                let key = block * super::BLOCK + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if self.entries[key].as_ref().is_some_and(E::is_cancelled) {
                    let entry = self.remove(key);
                    self.removed.extend(entry);
                    swept += 1;
                }
            }
        }
        self.shrink_if_empty();
        swept
    }

    fn abandon(&mut self) -> Vec<Waker> {
        let entries = std::mem::take(&mut self.entries);
        self.occupied = Vec::new();
        self.free = Vec::new();
        self.len = 0;
        let wakers = entries.iter().flatten().filter_map(E::abandon).collect();
        self.removed.extend(entries.into_iter().flatten());
        wakers
    }

    fn take_removed(&mut self) -> Option<Removed> {
        debug_assert!(self.checked.is_empty(), "every ended entry's wait told");
        if self.removed.is_empty() {
            return None;
        }
        let spare = std::mem::take(&mut *lock(&self.spare));
        Some(Box::new(Recycled {
            entries: std::mem::replace(&mut self.removed, spare),
            home: self.spare.clone(),
        }))
    }

    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

/// A batch of a column's removed entries, whose vector goes back to the column once they are
/// dropped: a round's removals reuse its memory instead of growing a new vector (see
/// [`PassBuffers`](crate::core::PassBuffers) for why that matters).
struct Recycled<E> {
    entries: Vec<E>,
    home: Arc<Mutex<Vec<E>>>,
}

impl<E: Send> Batch for Recycled<E> {
    fn drop_each(mut self: Box<Self>) {
        drop_each_caught(self.entries.drain(..));
        keep_spare(&mut lock(&self.home), std::mem::take(&mut self.entries));
    }
}

/// Empties `slot` (key `key`, its bit in `word`), keeping the column's free list and count: the
/// one place an entry leaves its slot.
fn vacate<E>(
    slot: &mut Option<E>,
    key: usize,
    word: &mut u64,
    free: &mut Vec<usize>,
    len: &mut usize,
) -> Option<E> {
    let entry = slot.take();
    if entry.is_some() {
        *word &= !(1 << (key % super::BLOCK));
        free.push(key);
        *len -= 1;
    }
    entry
}

/// Takes the entry in `slot` (key `key`, its bit in `word`), which its check ended or whose wait
/// gave up, out of its column, for its drop once no lock is held; an ended one waits in `checked`
/// for [`Typed::finish_checked`].
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)] // the column's fields, borrowed apart around the pass's loop
fn retire<E: Evaluate>(
    slot: &mut Option<E>,
    key: usize,
    word: &mut u64,
    free: &mut Vec<usize>,
    len: &mut usize,
    removed: &mut Vec<E>,
    checked: &mut Vec<(usize, E::Checked)>,
    ended: Evaluated<E::Checked>,
    pass: &mut Pass<'_>,
) {
    removed.extend(vacate(slot, key, word, free, len));
    match ended {
        Evaluated::Checked(value) => checked.push((removed.len() - 1, value)),
        Evaluated::GaveUp => pass.unmarked += 1,
        Evaluated::Pending => unreachable!("a pending entry stays"),
    }
}
