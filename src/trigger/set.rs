//! [`Descriptors`]: a set of descriptors the C library controls, waited on as one.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use rustix::event::epoll::{self, EventData, EventFlags};

/// What to watch a descriptor for.
///
/// # Examples
///
/// ```
/// use ffi_pump::Interest;
///
/// let both = Interest::READABLE | Interest::WRITABLE;
/// assert!(both.is_readable() && both.is_writable());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interest(u8);

impl Interest {
    /// Readable (or at end of file, or hung up).
    pub const READABLE: Interest = Interest(1);
    /// Writable.
    pub const WRITABLE: Interest = Interest(2);

    /// Whether readability is asked for.
    pub fn is_readable(self) -> bool {
        self.0 & 1 != 0
    }

    /// Whether writability is asked for.
    pub fn is_writable(self) -> bool {
        self.0 & 2 != 0
    }

    fn flags(self) -> EventFlags {
        let mut flags = EventFlags::empty();
        if self.is_readable() {
            flags |= EventFlags::IN | EventFlags::RDHUP;
        }
        if self.is_writable() {
            flags |= EventFlags::OUT;
        }
        flags
    }
}

impl std::ops::BitOr for Interest {
    type Output = Interest;

    fn bitor(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }
}

/// A descriptor the set found ready, and for what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    fd: RawFd,
    flags: EventFlags,
}

impl Ready {
    /// The descriptor's number, as the library watched it.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Readable, at end of file, or the peer hung up its writing side.
    pub fn is_readable(&self) -> bool {
        self.flags
            .intersects(EventFlags::IN | EventFlags::RDHUP | EventFlags::HUP)
    }

    /// Writable.
    pub fn is_writable(&self) -> bool {
        self.flags.contains(EventFlags::OUT)
    }

    /// An error condition, or hung up altogether: the library will find out reading or writing.
    pub fn is_error(&self) -> bool {
        self.flags.intersects(EventFlags::ERR | EventFlags::HUP)
    }
}

/// The descriptors a C library asks its loop to watch (libcurl's socket callback, GLib's
/// `GPollFD`s, libusb's pollfds), waited on as one, by the pump.
///
/// Made by [`Builder::build_with_descriptors`](crate::Builder::build_with_descriptors) and handed
/// to the factory, so it lives in the loop's state on the pump thread. The library watches,
/// re-watches (another interest) and unwatches descriptors from `run_once` — where such
/// callbacks fire — or from a [`LoopHandle`](crate::LoopHandle) call; `run_once` reads what is
/// ready with [`ready`](Descriptors::ready). The pump wakes when any watched descriptor is ready
/// (one registration with the runtime's reactor, whatever the number of descriptors).
///
/// Readiness is level-triggered: a descriptor stays ready until the library consumed what made
/// it so, and while one is ready the pump runs again. A descriptor the library closed while
/// watched leaves the set by itself (the kernel drops it); [`forget`](Descriptors::forget) drops
/// the set's own record of it.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Descriptors, Interest};
/// use std::io::Write;
/// use std::os::fd::AsRawFd;
/// use std::os::unix::net::UnixStream;
///
/// let (socket, mut peer) = UnixStream::pair()?;
/// let mut descriptors = Descriptors::new()?;
/// descriptors.watch(&socket, Interest::READABLE)?;
/// assert_eq!(descriptors.watched().collect::<Vec<_>>(), [(socket.as_raw_fd(), Interest::READABLE)]);
/// assert_eq!(descriptors.ready().count(), 0);
///
/// peer.write_all(b"!")?;
/// let ready: Vec<_> = descriptors.ready().collect();
/// assert_eq!(ready.len(), 1);
/// assert_eq!(ready[0].fd(), socket.as_raw_fd());
/// assert!(ready[0].is_readable() && !ready[0].is_writable());
///
/// // Level-triggered: unread, it is still ready; unwatched, it is not handed any more.
/// assert_eq!(descriptors.ready().count(), 1);
/// descriptors.unwatch(&socket)?;
/// assert_eq!(descriptors.ready().count(), 0);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Descriptors {
    epoll: OwnedFd,
    watched: HashMap<RawFd, Interest>,
    /// What the last [`ready`](Descriptors::ready) found (the kernel's event records carry a
    /// pointer-sized union, so they are not kept across runs: that would make the set `!Send`).
    found: Vec<Ready>,
}

impl fmt::Debug for Descriptors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Descriptors")
            .field("watched", &self.watched.len())
            .finish_non_exhaustive()
    }
}

/// The set itself: readable while any watched descriptor is ready, for
/// [`run_on_readable`](crate::Builder::run_on_readable).
impl AsFd for Descriptors {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }
}

impl Descriptors {
    /// An empty set.
    ///
    /// [`Builder::build_with_descriptors`](crate::Builder::build_with_descriptors) makes one for
    /// a loop on the pump thread. For a loop that lives in the pump (`build` with a `run_once` that returns deadlines,
    /// spawned on any backend), make it here, hand it to
    /// [`run_on_readable`](crate::Builder::run_on_readable) — the set is readable while any
    /// descriptor in it is ready — and move it into `run_once`.
    ///
    /// # Errors
    ///
    /// What the kernel says when the set cannot be made (out of descriptors).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Descriptors, Interest, Pump};
    /// use std::io::Write;
    /// use std::os::unix::net::UnixStream;
    ///
    /// # futures_lite::future::block_on(async {
    /// let (socket, mut peer) = UnixStream::pair()?;
    /// let mut descriptors = Descriptors::new()?;
    /// descriptors.watch(&socket, Interest::READABLE)?;
    /// let pump = Pump::builder()
    ///     .run_on_readable(&descriptors)
    ///     .build(move || {
    ///         for ready in descriptors.ready() {
    ///             // hand `ready.fd()` to the library: readable, writable, error
    ///             let _ = (ready.fd(), ready.is_readable());
    ///         }
    ///         let _ = &socket;
    ///         None // the library's own deadline, if it has one
    ///     })?;
    /// pump.spawn();
    /// peer.write_all(b"!")?;
    /// pump.turn().await?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn new() -> io::Result<Descriptors> {
        Ok(Descriptors {
            epoll: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            watched: HashMap::new(),
            found: Vec::new(),
        })
    }

    /// Watches `fd` for `interest`, or changes what it is watched for.
    ///
    /// # Errors
    ///
    /// What the kernel says (`EBADF` for a closed descriptor, `EPERM` for a regular file,
    /// `EINVAL` for the set itself, `ELOOP` for a set that watches this one); the set is left as
    /// it was, and stays usable.
    pub fn watch(&mut self, fd: impl AsFd, interest: Interest) -> io::Result<()> {
        let raw = fd.as_fd().as_raw_fd();
        let data = EventData::new_u64(raw as u64);
        let flags = interest.flags();
        let known = self.watched.contains_key(&raw);
        // A descriptor closed and reopened under the same number left the kernel's set when it
        // was closed, though not this record; and one this record lost may still be there.
        let outcome = match known {
            true => epoll::modify(&self.epoll, &fd, data, flags).or_else(|err| match err {
                rustix::io::Errno::NOENT => epoll::add(&self.epoll, &fd, data, flags),
                err => Err(err),
            }),
            false => epoll::add(&self.epoll, &fd, data, flags).or_else(|err| match err {
                rustix::io::Errno::EXIST => epoll::modify(&self.epoll, &fd, data, flags),
                err => Err(err),
            }),
        };
        outcome?;
        self.watched.insert(raw, interest);
        Ok(())
    }

    /// Stops watching `fd`.
    ///
    /// # Errors
    ///
    /// What the kernel says; a descriptor the set no longer holds is not an error.
    pub fn unwatch(&mut self, fd: impl AsFd) -> io::Result<()> {
        let raw = fd.as_fd().as_raw_fd();
        self.watched.remove(&raw);
        match epoll::delete(&self.epoll, &fd) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Forgets the descriptor numbered `fd`, which the library closed while it was watched (the
    /// kernel dropped it from the set then). Never touches the descriptor: its number may belong
    /// to another file by now.
    pub fn forget(&mut self, fd: RawFd) {
        self.watched.remove(&fd);
    }

    /// The descriptors watched, and for what, in no particular order: to bring the set in line
    /// with a list the library hands out whole (GLib's query, libusb's pollfds).
    pub fn watched(&self) -> impl Iterator<Item = (RawFd, Interest)> + '_ {
        self.watched.iter().map(|(&fd, &interest)| (fd, interest))
    }

    /// How many descriptors are watched.
    pub fn len(&self) -> usize {
        self.watched.len()
    }

    /// Whether no descriptor is watched.
    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// The watched descriptors that are ready now, and for what; asks the kernel without
    /// waiting. Call it in `run_once`, before handing the events to the library.
    ///
    /// One call hands at most 4 096 descriptors. Those left over stay ready (readiness is
    /// level-triggered), so the set stays readable and a pump watching it runs again at once, and
    /// the next call hands them first: none waits behind descriptors that stay ready.
    pub fn ready(&mut self) -> impl Iterator<Item = Ready> + '_ {
        let capacity = self.watched.len().clamp(1, 4096);
        let mut events = Vec::with_capacity(capacity);
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // Failing here (EINTR) only means nothing is handed this run; readiness is level-triggered,
        // so the set stays readable and the next run finds it.
        let _ = epoll::wait(
            &self.epoll,
            rustix::buffer::spare_capacity(&mut events),
            Some(&zero),
        );
        self.found.clear();
        self.found.extend(events.iter().map(|event| Ready {
            fd: event.data.u64() as RawFd,
            flags: event.flags,
        }));
        self.found.iter().copied()
    }
}
