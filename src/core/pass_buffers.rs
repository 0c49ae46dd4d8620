//! [`PassBuffers`]: the memory an evaluation fills, kept from one round to the next.

use std::task::Waker;

use crate::registry::{drop_removed, Removed};
use crate::sync::{lock, Mutex};

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
}

impl PassBuffers {
    /// The spare buffers (empty), or new ones if another pass holds them.
    pub(crate) fn take(&self) -> Buffers {
        std::mem::take(&mut *lock(&self.spare))
    }

    /// Wakes the waits in `buffers`, drops their entries, and keeps the emptied vectors.
    pub(crate) fn wake(&self, mut buffers: Buffers) {
        for waker in buffers.woken.drain(..) {
            waker.wake();
        }
        drop_removed(buffers.removed.drain(..));
        let mut spare = lock(&self.spare);
        if spare.woken.capacity() < buffers.woken.capacity() {
            spare.woken = buffers.woken;
        }
        if spare.removed.capacity() < buffers.removed.capacity() {
            spare.removed = buffers.removed;
        }
    }
}
