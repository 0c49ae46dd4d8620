//! [`PassBuffers`]: the memory an evaluation fills, kept from one round to the next.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::task::Waker;

use event_listener::Event;

use crate::registry::{drop_removed, keep_spare, Removed};
use crate::sync::{lock, AtomicBool, AtomicUsize, Mutex};

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
    /// [`PassBuffers::waking`] while these count there ([`PassBuffers::hold`]), until woken or
    /// dropped.
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
    settled: Event,
}

impl Waking {
    fn done(&self) {
        if self.count.fetch_sub(1, SeqCst) == 1 {
            self.settled.notify(usize::MAX);
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

    /// Counts `buffers`' waits as still to wake until [`wake`](PassBuffers::wake) woke them:
    /// called with the loop lock held, before letting go, so whoever takes the lock next sees
    /// them ([`settled`](PassBuffers::settled)).
    pub(crate) fn hold(&self, buffers: &mut Buffers) {
        if !buffers.woken.is_empty() && buffers.held.is_none() {
            self.waking.count.fetch_add(1, SeqCst);
            buffers.held = Some(self.waking.clone());
        }
    }

    /// Waits until no pass that let go of the loop lock is still waking the waits its checks
    /// ended.
    pub(crate) async fn settled(&self) {
        loop {
            let settled = self.waking.settled.listen();
            if self.waking.count.load(SeqCst) == 0 {
                return;
            }
            settled.await;
        }
    }

    /// Wakes the waits in `buffers`, drops their entries, and keeps the emptied vectors.
    pub(crate) fn wake(&self, mut buffers: Buffers) {
        for waker in buffers.woken.drain(..) {
            waker.wake();
        }
        if let Some(waking) = buffers.held.take() {
            waking.done();
        }
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
