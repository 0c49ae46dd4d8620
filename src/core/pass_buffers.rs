//! [`PassBuffers`]: the memory an evaluation fills, kept from one round to the next.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::task::Waker;

use event_listener::Event;

use crate::registry::{drop_removed, keep_spare, Removed};
use crate::sync::{fence, lock, AtomicBool, AtomicUsize, Mutex};

/// What a pass over the checks hands out once it lets go of the loop lock: the wakers of the
/// waits it completed, and the entries it took out (dropped with no lock held). The vectors are
/// kept for the next pass: grown anew every round, a round that completes a few hundred waits
/// would reallocate and copy them each time, and glibc answers each allocation of a kilobyte or
/// more by consolidating every small chunk freed since (the waits' own state, freed by the
/// thousand).
#[derive(Default)]
pub(crate) struct Buffers {
    pub(crate) woken: Vec<Waker>,
    pub(crate) removed: Vec<Removed>,
    /// [`PassBuffers::waking`] while these count there ([`PassBuffers::hold`]), until settled
    /// ([`PassBuffers::settle`], [`PassBuffers::finish`]) or dropped.
    held: Option<Arc<Waking>>,
}

impl Drop for Buffers {
    fn drop(&mut self) {
        if let Some(waking) = self.held.take() {
            waking.done();
        }
    }
}

/// The passes that let go of the loop lock with waits still to wake, and "none is left".
#[derive(Default)]
struct Waking {
    count: AtomicUsize,
    /// Turns waiting for `settled`: a pass that ends the count notifies only if one does (with
    /// event-listener 5 every `notify` takes the event's lock). Each side writes its counter,
    /// then a fence, then reads the other's, so one of them sees the other: a turn that finds
    /// passes still counted is seen by the last of them as it ends.
    listening: AtomicUsize,
    settled: Event,
}

impl Waking {
    fn done(&self) {
        if self.count.fetch_sub(1, SeqCst) == 1 {
            fence(SeqCst);
            if self.listening.load(SeqCst) > 0 {
                self.settled.notify(usize::MAX);
            }
        }
    }
}

/// The spare [`Buffers`] of a pump. One pass at a time holds the loop lock, but the last one
/// may still be waking its waits while the next fills: that one then starts from empty vectors.
#[derive(Default)]
pub(crate) struct PassBuffers {
    spare: Mutex<Buffers>,
    /// `spare` holds memory: a pump whose passes never wake anything takes no lock for it.
    kept: AtomicBool,
    /// Passes that let go of the loop lock with waits still to wake.
    waking: Arc<Waking>,
}

impl PassBuffers {
    /// The spare buffers (empty), or new ones if another pass holds them.
    pub(crate) fn take(&self) -> Buffers {
        if !self.kept.load(Relaxed) {
            return Buffers::default();
        }
        self.kept.store(false, Relaxed);
        std::mem::take(&mut *lock(&self.spare))
    }

    /// Counts the pass that filled `buffers` as still waking until
    /// [`finish`](PassBuffers::finish): called with the loop lock held, before letting go, so
    /// whoever takes the lock next sees it ([`settled`](PassBuffers::settled)). Every pass
    /// counts, with waits to wake or not: a run still has its listeners to tell.
    pub(crate) fn hold(&self, buffers: &mut Buffers) {
        if buffers.held.is_none() {
            self.waking.count.fetch_add(1, SeqCst);
            buffers.held = Some(self.waking.clone());
        }
    }

    /// Waits until no pass that let go of the loop lock is still waking what it ended.
    pub(crate) async fn settled(&self) {
        if self.waking.count.load(SeqCst) == 0 {
            return;
        }
        self.waking.listening.fetch_add(1, SeqCst);
        let _listening = Listening(&self.waking.listening);
        fence(SeqCst);
        loop {
            let settled = self.waking.settled.listen();
            if self.waking.count.load(SeqCst) == 0 {
                return;
            }
            settled.await;
        }
    }

    /// Wakes the waits in `buffers`, by reference: a waker's last reference may own a task
    /// whose drop turns the pump, which must not find this pass still counted. The pass counts
    /// until [`settle`](PassBuffers::settle) or [`finish`](PassBuffers::finish).
    pub(crate) fn wake(&self, buffers: &mut Buffers) {
        for waker in &buffers.woken {
            waker.wake_by_ref();
        }
    }

    /// Ends the count of the pass that filled `buffers`: it has told everything it ended.
    pub(crate) fn settle(&self, buffers: &mut Buffers) {
        if let Some(waking) = buffers.held.take() {
            waking.done();
        }
    }

    /// Ends the pass's count if it still runs, then drops its wakers and entries — user code
    /// (the last reference of a task, what an ended check captured) that may turn the pump,
    /// which then finds this pass settled — and keeps the emptied vectors.
    pub(crate) fn finish(&self, mut buffers: Buffers) {
        self.settle(&mut buffers);
        buffers.woken.clear();
        drop_removed(buffers.removed.drain(..));
        if buffers.woken.capacity() == 0 && buffers.removed.capacity() == 0 {
            return;
        }
        let mut spare = lock(&self.spare);
        keep_spare(&mut spare.woken, std::mem::take(&mut buffers.woken));
        keep_spare(&mut spare.removed, std::mem::take(&mut buffers.removed));
        self.kept.store(true, Relaxed);
    }
}

/// A turn counted among those waiting for [`PassBuffers::settled`] while it lives (the future
/// may be dropped mid-wait).
struct Listening<'a>(&'a AtomicUsize);

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::PassBuffers;

    struct Counted(AtomicUsize);

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// A pass's buffers from `home`, holding `n` wakers that count their wakes.
    fn with_wakers(home: &PassBuffers, n: usize) -> (Arc<Counted>, super::Buffers) {
        let counted = Arc::new(Counted(AtomicUsize::new(0)));
        let mut buffers = home.take();
        buffers
            .woken
            .extend((0..n).map(|_| Waker::from(counted.clone())));
        (counted, buffers)
    }

    #[test]
    fn wakes_every_waker_then_keeps_the_memory_for_the_next_pass() {
        let home = PassBuffers::default();
        let (counted, mut buffers) = with_wakers(&home, 300);
        let grown = buffers.woken.capacity();
        home.wake(&mut buffers);
        home.finish(buffers);
        assert_eq!(counted.0.load(SeqCst), 300, "every waker woken once");
        let next = home.take();
        assert!(next.woken.is_empty());
        assert!(
            next.woken.capacity() >= grown,
            "the next pass starts with the last one's memory ({} < {grown})",
            next.woken.capacity()
        );
        // Taken meanwhile: another pass starts from nothing rather than wait.
        assert_eq!(home.take().woken.capacity(), 0);
    }

    #[test]
    fn a_burst_does_not_keep_its_memory() {
        let home = PassBuffers::default();
        let (counted, mut buffers) = with_wakers(&home, crate::registry::SPARE_AT_MOST + 1);
        home.wake(&mut buffers);
        home.finish(buffers);
        assert_eq!(counted.0.load(SeqCst), crate::registry::SPARE_AT_MOST + 1);
        assert_eq!(home.take().woken.capacity(), 0, "kept past the bound");
    }
}
