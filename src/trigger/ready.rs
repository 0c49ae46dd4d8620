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
}

/// What the kernel reported for a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Found {
    /// Readable, at end of file, or hung up.
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    pub(crate) error: bool,
    pub(crate) hangup: bool,
}

impl Found {
    /// What of it `interest` hands a registration (errors and hang-ups to any interest).
    pub(crate) fn for_interest(self, interest: Interest) -> Option<Found> {
        let found = Found {
            readable: self.readable && interest.is_readable(),
            writable: self.writable && interest.is_writable(),
            error: self.error,
            hangup: self.hangup,
        };
        let any = found.readable || found.writable || found.error || found.hangup;
        (!interest.is_empty() && any).then_some(found)
    }
}

impl Ready {
    pub(crate) fn new(token: u64, fd: RawDescriptor, found: Found) -> Ready {
        Ready { token, fd, found }
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

    /// An error is pending on the descriptor (`EPOLLERR`, kqueue's `EV_ERROR`: a failed connect,
    /// a reset); the library learns which when it reads, writes or asks `SO_ERROR`.
    pub fn is_error(&self) -> bool {
        self.found.error
    }

    /// The peer hung up: its writing side (`EPOLLRDHUP`) or the whole connection (`EPOLLHUP`,
    /// kqueue's `EV_EOF`). What was sent before is still there to read.
    pub fn is_hangup(&self) -> bool {
        self.found.hangup
    }
}
