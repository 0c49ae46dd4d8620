//! [`PassBuffers`]: the memory an evaluation fills, kept from one round to the next.

use std::sync::atomic::Ordering::Relaxed;
use std::task::Waker;

use crate::registry::{drop_removed, keep_spare, Removed};
use crate::sync::{lock, AtomicBool, Mutex};

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
}

/// The spare [`Buffers`] of a pump. One pass at a time holds the loop lock, but the last one
/// may still be waking its waits while the next fills: that one then starts from empty vectors.
#[derive(Default)]
pub(crate) struct PassBuffers {
    spare: Mutex<Buffers>,
    /// `spare` holds memory: a pump whose passes never wake anything takes no lock for it.
    kept: AtomicBool,
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

    /// Wakes the waits in `buffers`, drops their entries, and keeps the emptied vectors.
    pub(crate) fn wake(&self, mut buffers: Buffers) {
        for waker in buffers.woken.drain(..) {
            waker.wake();
        }
        drop_removed(buffers.removed.drain(..));
        if buffers.woken.capacity() == 0 && buffers.removed.capacity() == 0 {
            return;
        }
        let mut spare = lock(&self.spare);
        keep_spare(&mut spare.woken, buffers.woken);
        keep_spare(&mut spare.removed, buffers.removed);
        self.kept.store(true, Relaxed);
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
        let (counted, buffers) = with_wakers(&home, 300);
        let grown = buffers.woken.capacity();
        home.wake(buffers);
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
        let (counted, buffers) = with_wakers(&home, crate::registry::SPARE_AT_MOST + 1);
        home.wake(buffers);
        assert_eq!(counted.0.load(SeqCst), crate::registry::SPARE_AT_MOST + 1);
        assert_eq!(home.take().woken.capacity(), 0, "kept past the bound");
    }
}
