//! [`Interest`] and [`Ready`]: what a registration of the descriptor set asks for, and what it
//! was found ready for.

/// A descriptor as a C library hands it out: a file descriptor on Unix (`RawFd`), a socket on
/// Windows (`RawSocket`, libcurl's `curl_socket_t`).
#[cfg(unix)]
pub type RawDescriptor = std::os::fd::RawFd;

/// A descriptor as a C library hands it out: a file descriptor on Unix (`RawFd`), a socket on
/// Windows (`RawSocket`, libcurl's `curl_socket_t`).
#[cfg(windows)]
pub type RawDescriptor = std::os::windows::io::RawSocket;

/// What to watch a descriptor for.
///
/// # Examples
///
/// ```
/// use ffi_pump::Interest;
///
/// let both = Interest::READABLE | Interest::WRITABLE;
/// assert!(both.is_readable() && both.is_writable());
/// assert!(Interest::NONE.is_empty());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Interest(u8);

impl Interest {
    /// Nothing: the registration is kept, and not waited on (a D-Bus watch that is disabled).
    pub const NONE: Interest = Interest(0);
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

    /// Whether nothing is asked for.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The interest of a `struct pollfd`'s `events`, for a library that says what to watch the way
    /// poll(2) is asked (GLib's `GPollFD`, libusb's `libusb_pollfd`, ALSA's
    /// `snd_pcm_poll_descriptors`): `POLLIN` or `POLLPRI` asks for [`READABLE`](Self::READABLE),
    /// `POLLOUT` for [`WRITABLE`](Self::WRITABLE). What poll(2) reports without being asked
    /// (`POLLERR`, `POLLHUP`) the set hands a registration that asks for reading or writing too;
    /// asked for alone (GLib's `G_IO_HUP | G_IO_ERR`) they are [`NONE`](Self::NONE): registered,
    /// not waited on.
    ///
    /// Not watched: priority data alone (`POLLPRI` without `POLLIN`: out-of-band bytes, a sysfs
    /// attribute that changed) on Linux, where `POLLPRI` waits for ordinary data as `POLLIN` does —
    /// but where the set stands on `polling` (kqueue, event ports, and Linux built with
    /// `--cfg ffi_pump_polling`), whose readability takes urgent data in, an out-of-band byte
    /// alone is handed as readable (`POLLIN`) until a read passes its mark; and `POLLRDNORM`,
    /// `POLLWRNORM` and the band bits, whose own `revents` bits the set never sets (ask with
    /// `POLLIN` and `POLLOUT`).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Interest;
    ///
    /// // <poll.h>: POLLIN 0x1, POLLPRI 0x2, POLLOUT 0x4, POLLHUP 0x10.
    /// assert_eq!(Interest::from_poll_events(0x1 | 0x10), Interest::READABLE);
    /// assert_eq!(Interest::from_poll_events(0x4), Interest::WRITABLE);
    /// assert_eq!(Interest::from_poll_events(0x10), Interest::NONE);
    /// ```
    #[cfg(unix)]
    pub fn from_poll_events(events: std::ffi::c_short) -> Interest {
        use rustix::event::PollFlags;
        let mut interest = Interest::NONE;
        if events & (poll_bit(PollFlags::IN) | poll_bit(PollFlags::PRI)) != 0 {
            interest |= Interest::READABLE;
        }
        if events & poll_bit(PollFlags::OUT) != 0 {
            interest |= Interest::WRITABLE;
        }
        interest
    }
}

/// A poll(2) flag as `<poll.h>` defines it, in the type of `struct pollfd`'s fields.
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // `u16` in rustix's own backend, `c_short` in its libc one
pub(crate) fn poll_bit(flag: rustix::event::PollFlags) -> std::ffi::c_short {
    flag.bits() as std::ffi::c_short
}

/// The poll(2) bits of the directions `interest` does not ask for.
#[cfg(unix)]
fn unasked_poll_bits(interest: Interest) -> std::ffi::c_short {
    use rustix::event::PollFlags;
    let mut unasked = 0;
    if !interest.is_readable() {
        unasked |= poll_bit(PollFlags::IN);
    }
    if !interest.is_writable() {
        unasked |= poll_bit(PollFlags::OUT);
    }
    unasked
}

impl std::ops::BitOr for Interest {
    type Output = Interest;

    fn bitor(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }
}

impl std::ops::BitOrAssign for Interest {
    fn bitor_assign(&mut self, other: Interest) {
        self.0 |= other.0;
    }
}

/// A registration the set found ready, and for what.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Descriptors, Interest};
/// use std::os::fd::AsRawFd;
/// use std::os::unix::net::UnixStream;
///
/// let (socket, peer) = UnixStream::pair()?;
/// let descriptors = Descriptors::new()?;
/// descriptors.watch(socket.as_raw_fd(), Interest::READABLE | Interest::WRITABLE, 3)?;
/// drop(peer); // the peer hangs up
/// let ready = descriptors.ready()[0];
/// assert_eq!((ready.token(), ready.fd()), (3, socket.as_raw_fd()));
/// assert!(ready.is_readable() && ready.is_hangup() && !ready.is_error());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    token: u64,
    fd: RawDescriptor,
    found: Found,
    generation: u64,
}

/// What the kernel reported for a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Found {
    /// Readable, at end of file, or hung up.
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    pub(crate) error: bool,
    /// Hung up: the whole connection (poll(2)'s `POLLHUP`, reported to any interest).
    pub(crate) hangup: bool,
    /// The peer shut its writing side (`EPOLLRDHUP`): a hang-up for a reader only.
    pub(crate) read_hangup: bool,
    /// What poll(2) would have set in `revents`, asked for both directions (epoll reports in
    /// its bits; kqueue and event ports as far as `polling` tells).
    #[cfg(unix)]
    pub(crate) revents: std::ffi::c_short,
}

impl Found {
    /// What of it `interest` hands a registration: errors and hang-ups of the whole connection
    /// to any interest, as poll(2) does, the peer's shut writing side to a reader only (a writer
    /// asked nothing of it: a socket watched for writing by one registration and for reading by
    /// another would otherwise hand the writer a report of nothing it can use).
    pub(crate) fn for_interest(self, interest: Interest) -> Option<Found> {
        let found = Found {
            readable: self.readable && interest.is_readable(),
            writable: self.writable && interest.is_writable(),
            error: self.error,
            hangup: self.hangup || (self.read_hangup && interest.is_readable()),
            read_hangup: false,
            #[cfg(unix)]
            revents: self.revents & !unasked_poll_bits(interest),
        };
        let any = found.readable || found.writable || found.error || found.hangup;
        (!interest.is_empty() && any).then_some(found)
    }
}

impl Ready {
    pub(crate) fn new(token: u64, fd: RawDescriptor, found: Found, generation: u64) -> Ready {
        Ready {
            token,
            fd,
            found,
            generation,
        }
    }

    /// The generation of the registration it was found for.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The token the registration was watched with.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The descriptor's number, as the library watched it.
    pub fn fd(&self) -> RawDescriptor {
        self.fd
    }

    /// Readable, at end of file, or the peer hung up (a read will not block).
    pub fn is_readable(&self) -> bool {
        self.found.readable
    }

    /// Writable.
    pub fn is_writable(&self) -> bool {
        self.found.writable
    }

    /// An error is pending on the descriptor (`EPOLLERR`: a failed connect, a reset); the library
    /// learns which when it reads, writes or asks `SO_ERROR`. On kqueue and event ports
    /// (through `polling`, which does not say) never: an error shows as readiness there.
    pub fn is_error(&self) -> bool {
        self.found.error
    }

    /// The peer hung up: its writing side (`EPOLLRDHUP`, told to a registration that reads) or
    /// the whole connection (`EPOLLHUP`, told to any). What was sent before is still there to
    /// read. Through `polling` less is told: on Linux (the `ffi_pump_polling` build) only a
    /// connection closed both ways, on Windows only a reset one (AFD's abort, an
    /// [error](Self::is_error) too), on kqueue and event ports nothing — a hang-up shows as
    /// readiness there (on Windows a peer's orderly close, of its writing side or of both), and
    /// the library's read finds the end of the stream.
    pub fn is_hangup(&self) -> bool {
        self.found.hangup
    }

    /// What was found, as poll(2) would have set a `struct pollfd`'s `revents` asked for the
    /// registration's interest, for a library that is handed readiness that way (GLib's
    /// `g_main_context_check`, ALSA's `snd_pcm_poll_descriptors_revents`): `POLLIN`, `POLLOUT`,
    /// `POLLERR` and `POLLHUP`, as `<poll.h>` defines them.
    ///
    /// It is not [`is_hangup`](Self::is_hangup) as a bit: a TCP peer that closed (or only shut
    /// down its writing side) is `POLLIN` alone, as poll(2) says it — the library reads what is
    /// left, then the end of the stream — and `POLLHUP` is a connection closed both ways. On
    /// Linux these are the kernel's own bits (epoll reports in them); on kqueue and event ports
    /// (and on Linux built with `--cfg ffi_pump_polling`, the form the crate's CI tests them on)
    /// they are built from what `polling` reports, which has no `POLLHUP` and counts an error, a
    /// hang-up and urgent data as readable, and an error as writable: a pending error on a
    /// registration that reads is `POLLIN | POLLERR` there (poll(2): `POLLERR`), on one that
    /// writes `POLLOUT | POLLERR` (a pipe whose reader closed; poll(2): `POLLERR`), a pipe whose
    /// writer closed `POLLIN` (poll(2): `POLLHUP`), an out-of-band byte alone `POLLIN` (poll(2):
    /// nothing).
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Descriptors, Interest};
    /// use std::io::Write;
    /// use std::net::{TcpListener, TcpStream};
    /// use std::os::fd::AsRawFd;
    ///
    /// let listener = TcpListener::bind("127.0.0.1:0")?;
    /// let socket = TcpStream::connect(listener.local_addr()?)?;
    /// let (mut peer, _) = listener.accept()?;
    /// let descriptors = Descriptors::new()?;
    /// descriptors.watch(socket.as_raw_fd(), Interest::READABLE, 1)?;
    ///
    /// // The peer answers and closes: the answer is still there to read, no `POLLHUP`.
    /// peer.write_all(b"bye")?;
    /// drop(peer);
    /// let ready = descriptors.ready()[0];
    /// assert!(ready.is_readable());
    /// const POLLIN: i16 = 0x1; // <poll.h>
    /// assert_eq!(ready.poll_revents(), POLLIN);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[cfg(unix)]
    pub fn poll_revents(&self) -> std::ffi::c_short {
        self.found.revents
    }
}
