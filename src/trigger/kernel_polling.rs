//! The descriptor set's kernel side on the other Unixes (macOS, iOS, the BSDs: kqueue; illumos
//! and Solaris: event ports), through smol-rs `polling` in level mode.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use polling::{Event, Events, PollMode, Poller};

use super::ready::{Found, Interest};

/// poll(2)'s `revents` for what `polling` reported: it has no hang-up of both ways.
fn poll_revents(event: &Event) -> std::ffi::c_short {
    use super::ready::poll_bit;
    use rustix::event::PollFlags;
    let bits = [
        (event.readable, PollFlags::IN),
        (event.writable, PollFlags::OUT),
        (event.is_err().unwrap_or(false), PollFlags::ERR),
    ];
    bits.into_iter()
        .filter(|&(found, _)| found)
        .fold(0, |revents, (_, flag)| revents | poll_bit(flag))
}

/// What the reactor watches: a poller holding the inner one.
pub(super) struct Outer(Poller);

/// The poller the registrations are in.
#[derive(Debug)]
pub(super) struct Instance(Poller);

/// The outer poller's one key.
const INNER: usize = 0;

/// The most free numbers [`Instance::new_above`] holds while it makes a poller.
const HELD_AT_MOST: usize = 256;

/// The free numbers above the highest one watched that [`Instance::new_above`] needs to find
/// before it holds any below.
const ROOM_ABOVE: RawFd = 16;

impl Outer {
    /// A new outer poller, and the inner one it holds.
    pub(super) fn new() -> io::Result<(Outer, Instance)> {
        let outer = Outer(Poller::new()?);
        let instance = Instance::new()?;
        outer.hold(&instance)?;
        Ok((outer, instance))
    }

    #[allow(unsafe_code)]
    fn hold(&self, instance: &Instance) -> io::Result<()> {
        // SAFETY: the inner poller is deleted from the outer one before it is dropped (`swap`),
        // or dropped together with it (both belong to one set).
        unsafe {
            self.0.add_with_mode(
                instance.0.as_raw_fd(),
                Event::readable(INNER),
                PollMode::Level,
            )
        }
    }

    /// Holds `new` in place of `old`: in first, as on epoll (`kernel_epoll.rs`).
    pub(super) fn swap(&self, old: &Instance, new: &Instance) -> io::Result<()> {
        self.hold(new)?;
        let _ = self.0.delete(old.0.as_fd());
        Ok(())
    }
}

impl AsFd for Outer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl Instance {
    /// Whether a change of an entry is refused for a number that names another file by now.
    /// Not on every platform here: kqueue's modify registers whatever the number names.
    pub(super) const A_CHANGE_CHECKS_THE_FILE: bool = false;

    pub(super) fn new() -> io::Result<Instance> {
        Ok(Instance(Poller::new()?))
    }

    /// A new poller whose descriptors take no number up to `highest`, where there is room.
    /// `polling` makes them itself (on Linux more than one): a first poller's duplicates hold
    /// the free numbers up to `highest` while it makes a second one — at most [`HELD_AT_MOST`]
    /// of them, and only with room above `highest` ([`ROOM_ABOVE`] numbers), so that no other
    /// thread's open finds none left. Otherwise, or if the second poller cannot be made with
    /// them held, the first one is the set's, under the lowest numbers, as the kernel gave
    /// them.
    pub(super) fn new_above(highest: RawFd) -> io::Result<Instance> {
        let first = Poller::new()?;
        let above = highest.saturating_add(ROOM_ABOVE);
        if rustix::io::fcntl_dupfd_cloexec(&first, above).is_err() {
            return Ok(Instance(first));
        }
        let mut held = Vec::new();
        while let Ok(duplicate) = rustix::io::fcntl_dupfd_cloexec(&first, 0) {
            if duplicate.as_raw_fd() > highest {
                break;
            }
            held.push(duplicate);
            if held.len() > HELD_AT_MOST {
                return Ok(Instance(first));
            }
        }
        // Out of descriptors with them held: the first one, under the kernel's numbers.
        Ok(Instance(Poller::new().unwrap_or(first)))
    }

    /// Adds or modifies the entry for `fd` (level-triggered).
    #[allow(unsafe_code)]
    pub(super) fn control(
        &self,
        add: bool,
        fd: RawFd,
        key: u64,
        asked: Interest,
    ) -> io::Result<()> {
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(ebadf()));
        }
        let key = usize::try_from(key).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
        let event = Event::new(key, asked.is_readable(), asked.is_writable());
        match add {
            // On epoll (`polling`'s form on Linux) the file may be in already: an entry the set
            // could not take out (the number was closed while a duplicate kept the file open,
            // and the same file is back under it). That entry is this one's.
            // SAFETY: the library deletes the descriptor from the set before it closes it
            // (`Descriptors`, "The library's part"); kqueue drops a descriptor's events when it
            // is closed anyway, so a broken promise leaves nothing behind.
            true => match unsafe { self.0.add_with_mode(fd, event, PollMode::Level) } {
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                    // SAFETY: as above.
                    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
                    self.0.modify_with_mode(borrowed, event, PollMode::Level)
                }
                added => added,
            },
            false => {
                // SAFETY: as above: the number is open while registered; the borrow lasts for
                // one call that names it and is never read or written through.
                let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
                self.0.modify_with_mode(borrowed, event, PollMode::Level)
            }
        }
    }

    /// Whether the entry for `fd` (under `key`, asking `asked`) is still the file the number
    /// names, asked by changing it to what it is: on epoll (`polling`'s form on Linux) the
    /// kernel refuses that for a number that names another file now. kqueue drops a number's
    /// events when it is closed, and re-adds them here for the file it names now, as an event
    /// port re-associates it: what the library watched under the number is then what is watched.
    #[allow(unsafe_code)]
    pub(super) fn still_holds(&self, fd: RawFd, key: u64, asked: Interest) -> bool {
        let Ok(key) = usize::try_from(key) else {
            return false;
        };
        let event = Event::new(key, asked.is_readable(), asked.is_writable());
        // SAFETY: as in `control`: the borrow lasts for one call that names the number.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        self.0
            .modify_with_mode(borrowed, event, PollMode::Level)
            .is_ok()
    }

    /// Takes `fd` out; whether an entry of an earlier file under the number may be left in the
    /// instance: where `polling` is epoll, a refusal (the number no longer names the file
    /// registered) may leave the entry of a file a duplicate keeps open; kqueue and event ports
    /// drop a descriptor's events with its close. The registration is gone either way.
    #[allow(unsafe_code)]
    pub(super) fn delete(&self, fd: RawFd) -> bool {
        if fd < 0 {
            return false;
        }
        // SAFETY: as in `control`.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let refused = self.0.delete(borrowed).is_err();
        refused && cfg!(any(target_os = "linux", target_os = "android"))
    }

    /// Whether its poller's number is above `highest` (made with the others held, its other
    /// descriptors are too).
    pub(super) fn is_above(&self, highest: RawFd) -> bool {
        self.0.as_fd().as_raw_fd() > highest
    }

    /// Hands `found` what is ready now, by key, up to `capacity` entries; does not wait.
    pub(super) fn wait(&self, capacity: usize, mut found: impl FnMut(u64, Found)) {
        let capacity = std::num::NonZeroUsize::new(capacity).unwrap_or(std::num::NonZeroUsize::MIN);
        let mut events = Events::with_capacity(capacity);
        // Failing here (EINTR) only means nothing is handed this run; what is ready stays so.
        let _ = self.0.wait(&mut events, Some(std::time::Duration::ZERO));
        for event in events.iter() {
            found(
                event.key as u64,
                Found {
                    readable: event.readable,
                    writable: event.writable,
                    error: event.is_err().unwrap_or(false),
                    hangup: event.is_interrupt(),
                    read_hangup: false,
                    revents: poll_revents(&event),
                },
            );
        }
    }
}

/// `EBADF`, for a negative number (no descriptor at all), as the kernel would say.
fn ebadf() -> i32 {
    rustix::io::Errno::BADF.raw_os_error()
}
