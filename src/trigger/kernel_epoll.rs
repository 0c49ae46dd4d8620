//! The descriptor set's kernel side on Linux and Android: epoll, through rustix.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use rustix::event::epoll::{self, EventData, EventFlags};

use super::ready::{Found, Interest};

/// The bits of an epoll report that poll(2) has too, with the same values.
const POLL_BITS: EventFlags = EventFlags::IN
    .union(EventFlags::OUT)
    .union(EventFlags::ERR)
    .union(EventFlags::HUP);

/// What the reactor watches: an epoll instance holding the inner one.
pub(super) struct Outer(OwnedFd);

/// The epoll instance the registrations are in.
#[derive(Debug)]
pub(super) struct Instance(OwnedFd);

impl Outer {
    /// A new outer instance, and the inner one it holds.
    pub(super) fn new() -> io::Result<(Outer, Instance)> {
        let outer = Outer(epoll::create(epoll::CreateFlags::CLOEXEC)?);
        let instance = Instance::new()?;
        epoll::add(&outer.0, &instance.0, EventData::new_u64(0), EventFlags::IN)?;
        Ok((outer, instance))
    }

    /// Holds `new` in place of `old`: in first, so the outer one never holds nothing (a pump
    /// made meanwhile would then find room under the kernel's nesting limits that `new` needs).
    pub(super) fn swap(&self, old: &Instance, new: &Instance) -> io::Result<()> {
        epoll::add(&self.0, &new.0, EventData::new_u64(0), EventFlags::IN)?;
        let _ = epoll::delete(&self.0, &old.0);
        Ok(())
    }
}

impl AsFd for Outer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

fn flags(interest: Interest) -> EventFlags {
    let mut flags = EventFlags::empty();
    if interest.is_readable() {
        flags |= EventFlags::IN | EventFlags::RDHUP;
    }
    if interest.is_writable() {
        flags |= EventFlags::OUT;
    }
    flags
}

impl Instance {
    /// A change of an entry names its file: epoll keys entries by open file and number, and
    /// refuses a modify for a number that names another file by now (see `control`).
    pub(super) const A_CHANGE_CHECKS_THE_FILE: bool = true;

    pub(super) fn new() -> io::Result<Instance> {
        Ok(Instance(epoll::create(epoll::CreateFlags::CLOEXEC)?))
    }

    /// A new instance under a number above `highest`, where there is room above it.
    pub(super) fn new_above(highest: RawFd) -> io::Result<Instance> {
        let instance = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        if instance.as_raw_fd() > highest {
            return Ok(Instance(instance));
        }
        // No room above (`EINVAL` past the limit of open files, `EMFILE`): the number the
        // kernel gave.
        let above = rustix::io::fcntl_dupfd_cloexec(&instance, highest.saturating_add(1));
        Ok(Instance(above.unwrap_or(instance)))
    }

    /// Adds or modifies the entry for `fd` (level-triggered). A modify is refused (`ENOENT`,
    /// `EBADF`) when the number no longer names the file the entry was made for: the caller lets
    /// that file's registrations go rather than hand a new file's readiness to them.
    pub(super) fn control(
        &self,
        add: bool,
        fd: RawFd,
        key: u64,
        asked: Interest,
    ) -> io::Result<()> {
        let (epoll, data, flags) = (&self.0, EventData::new_u64(key), flags(asked));
        by_number(fd, |fd| match add {
            // The file is in already (an entry the set could not take out): this is its entry.
            true => epoll::add(epoll, fd, data, flags).or_else(|err| match err {
                rustix::io::Errno::EXIST => epoll::modify(epoll, fd, data, flags),
                err => Err(err),
            }),
            false => epoll::modify(epoll, fd, data, flags),
        })
        .map_err(io::Error::from)
    }

    /// Whether the entry for `fd` (under `key`, asking `asked`) is still the file the number
    /// names: the kernel keys its entries by open file and number, so it refuses to change one
    /// for a number that names another file now (`ENOENT`) or none (`EBADF`). Changing it to
    /// what it is changes nothing.
    pub(super) fn still_holds(&self, fd: RawFd, key: u64, asked: Interest) -> bool {
        let (data, flags) = (EventData::new_u64(key), flags(asked));
        by_number(fd, |fd| epoll::modify(&self.0, fd, data, flags)).is_ok()
    }

    /// Takes `fd` out; whether an entry of an earlier file under the number may be left in the
    /// instance. The kernel refuses only when the number no longer names the file registered
    /// (closed: `EBADF`; another file: `ENOENT`, or `EPERM`, `EINVAL` for a regular file or an
    /// epoll instance); the entry is then gone already, or a leftover of a descriptor closed
    /// while watched, kept by a duplicate elsewhere. Either way the registration is gone.
    pub(super) fn delete(&self, fd: RawFd) -> bool {
        by_number(fd, |fd| epoll::delete(&self.0, fd)).is_err()
    }

    /// Whether its number is above `highest`.
    pub(super) fn is_above(&self, highest: RawFd) -> bool {
        self.0.as_raw_fd() > highest
    }

    /// Hands `found` what is ready now, by key, up to `capacity` entries; does not wait.
    pub(super) fn wait(&self, capacity: usize, mut found: impl FnMut(u64, Found)) {
        let mut events = Vec::with_capacity(capacity);
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // Failing here (EINTR) only means nothing is handed this run; what is ready stays so.
        let _ = epoll::wait(
            &self.0,
            rustix::buffer::spare_capacity(&mut events),
            Some(&zero),
        );
        for event in &events {
            let flags = event.flags;
            found(
                event.data.u64(),
                Found {
                    readable: flags
                        .intersects(EventFlags::IN | EventFlags::RDHUP | EventFlags::HUP),
                    writable: flags.contains(EventFlags::OUT),
                    error: flags.contains(EventFlags::ERR),
                    hangup: flags.contains(EventFlags::HUP),
                    read_hangup: flags.contains(EventFlags::RDHUP),
                    // epoll's bits are poll(2)'s (`EPOLLIN` is `POLLIN`, …).
                    revents: (flags & POLL_BITS).bits() as std::ffi::c_short,
                },
            );
        }
    }
}

/// Calls `f` with the library's descriptor `fd`, for one `epoll_ctl` that names it; a negative
/// number (no descriptor at all) is `EBADF`, as the kernel would say.
#[allow(unsafe_code)]
fn by_number<T>(
    fd: RawFd,
    f: impl FnOnce(BorrowedFd<'_>) -> rustix::io::Result<T>,
) -> rustix::io::Result<T> {
    if fd < 0 {
        return Err(rustix::io::Errno::BADF);
    }
    // SAFETY: the borrow lasts for one `epoll_ctl` and is never read or written through. The
    // library promises the number is open while it is registered (`Descriptors`, "The library's
    // part"); if it broke that promise, the call fails with `EBADF` or names whatever file took
    // the number, in this set only — the kernel checks the number, no memory is touched, and an
    // entry for a file the set does not hold a key for is dropped with its instance.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    f(borrowed)
}
