//! [`Descriptors`]: the descriptors a C library asks its loop to watch, waited on as one.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io;
#[cfg(unix)]
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::kernel::{Instance, Outer};
use super::ready::{Interest, RawDescriptor, Ready};

/// The descriptors a C library asks its loop to watch (libcurl's socket callback, D-Bus watches,
/// GLib's `GPollFD`s, libusb's pollfds), waited on as one by the pump.
///
/// A loop on its own thread gets the pump's set from
/// [`Setup::descriptors`](crate::Setup::descriptors); a loop in the pump makes one with
/// [`new`](Descriptors::new) and hands it to [`run_on_readable`](crate::Builder::run_on_readable).
/// Either way the pump runs the loop whenever a registration is ready, and the whole set is one
/// registration with the runtime's reactor, whatever the number of descriptors.
///
/// A set is a handle: `Clone`, `Send + Sync`, every method takes `&self`, so the library's
/// callbacks keep a clone and watch from inside `run_once` with no lock of their own, even while
/// the loop hands out what [`ready`](Descriptors::ready) returned (an owned list: nothing of the
/// set is borrowed while the library handles it).
///
/// Each registration has a **token** the binding chooses (the socket's number for curl, an id of
/// each watch for D-Bus): the set hands it back with each readiness, and it names the registration
/// to change or remove. A token reused within one run (a watch's address, freed and allocated again
/// by a callback) is met by the run's list of the first registration's readiness
/// ([`Run::ready`](crate::Run::ready) is that run's own), which
/// [`is_current`](Descriptors::is_current) tells. Several registrations may watch one descriptor,
/// each with its own interest (a read watch and a write watch on one socket); the set watches the
/// descriptor for what they ask together and hands each registration what it asked for.
///
/// Readiness is level-triggered: a registration stays ready until the library consumed what made
/// it so, and while one is ready the pump runs again.
///
/// # The library's part
///
/// Descriptors are watched by number, as C libraries hand them out, and the set never closes
/// them. A library unwatches a descriptor before it closes it, as libcurl
/// (`CURL_POLL_REMOVE`), D-Bus (`remove_watch`), GLib (`g_source_remove_unix_fd`) and libusb do.
/// The set carries the rest, also for a library that closes first, or never unwatches: while a
/// duplicate of the descriptor stays open elsewhere (a forked child), the kernel goes on
/// reporting the old file, and on Unix the set looks at each report whether the number still
/// names the file it watched: one `fstat` for a socket (whose inode is its own), and for any
/// other file — an eventfd, a timerfd, a FIFO or a device opened again, which share an inode
/// with their new open file — one `epoll_ctl` more, which the kernel refuses for a number whose
/// open file is not the one watched. If not — closed, or taken by a new file — nothing is
/// handed for it, its registrations are let go of as if unwatched, and the set moves the others
/// to a new kernel instance (made ahead, one more per set — one descriptor on epoll — so that a
/// move needs no free number: at the limit of open files a second move before one is free for
/// the next instance leaves the pump running until one is), leaving the old file behind: the
/// pump does not spin, and a new file
/// under the number is watched only when the library watches it (then as the new file) — each
/// registration it wants on it: a library that keeps two watches on the number (D-Bus's read
/// and write watch), reuses it without telling and then watches again through one, has only
/// that one on the new file. The
/// new instance takes none of the numbers the kernel took a watch of, where there is room above
/// them, so a number the library closed stays closed for it: listed again, it is refused
/// (`EBADF`), and the library's own `poll()` of it says `POLLNVAL`. On kqueue and event ports a
/// descriptor's events go with its close, and watching the number again registers the file it
/// names now.
///
/// # Platforms
///
/// On Linux and Android the set is an epoll instance; on macOS, iOS and the BSDs a kqueue, on
/// illumos and Solaris an event port (through smol-rs `polling`); on each a descriptor the
/// runtime's reactor watches, so the set serves a loop in the pump
/// ([`run_on_readable`](crate::Builder::run_on_readable)) and a loop on its own thread alike.
///
/// On Windows it holds sockets ([`RawDescriptor`](crate::RawDescriptor) is a `RawSocket`, as
/// libcurl's `curl_socket_t` is) on an I/O completion port, which no reactor can watch: a loop
/// on its own thread ([`Setup::descriptors`](crate::Setup::descriptors)) sleeps on the port
/// itself, and for a set given to [`run_on_readable`](crate::Builder::run_on_readable) the pump
/// keeps a thread that does. What the sleep found is handed by the next call of
/// [`ready`](Descriptors::ready) (with what the port has ready then); call it from the loop
/// (`run_once`), as the examples do. Unwatch a socket there before closing it: under wine (and
/// likely on Windows, whose local-close report takes the same path), a socket closed while
/// watched hangs the port's wait inside `polling` (a lock it takes twice) — the loop's own
/// thread then for good, and the set reports nothing more to anyone (its port's wait is the
/// stuck one); a `run_on_readable` pump's drop, wherever it happens, waits a second for its
/// stuck port thread and leaves it behind rather than hang — and a new socket under a closed
/// one's number is not told from it (features.md, "Platforms"). A socket's unwatch cancels the
/// port's poll of it, which the set's drop takes back (the poll holds a handle until a wait
/// takes its completion): unwatch, close, then drop the set — under wine, a poll cancelled on a
/// socket still open completes only once the socket closes, and if the set is gone by then, that
/// handle stays. A socket the program shuts down itself (`shutdown`, both ways) is not reported:
/// Windows' readiness (AFD) has no event for it.
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
/// let fd = socket.as_raw_fd();
/// let descriptors = Descriptors::new()?;
/// // A read watch and a write watch on one socket, each its own registration.
/// descriptors.watch(fd, Interest::READABLE, 1)?;
/// descriptors.watch(fd, Interest::NONE, 2)?; // kept, not waited on yet
/// assert!(descriptors.ready().is_empty());
///
/// peer.write_all(b"!")?;
/// let ready = descriptors.ready();
/// assert_eq!(ready.len(), 1);
/// assert_eq!((ready[0].token(), ready[0].fd()), (1, fd));
/// assert!(ready[0].is_readable() && !ready[0].is_writable());
///
/// // The write watch turned on: the socket is writable too, and each gets its own report.
/// descriptors.watch(fd, Interest::WRITABLE, 2)?;
/// let mut tokens: Vec<_> = descriptors.ready().iter().map(|r| r.token()).collect();
/// tokens.sort();
/// assert_eq!(tokens, [1, 2]);
///
/// descriptors.unwatch(1)?;
/// descriptors.unwatch(2)?;
/// assert!(descriptors.ready().is_empty() && descriptors.is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct Descriptors {
    inner: Arc<Inner>,
}

/// Two kernel instances: the registrations are in the inner one, which the outer one (what the
/// reactor watches) holds. A report for a descriptor the library closed while watched, whose
/// file lives on elsewhere, cannot be taken out of an epoll set; the set then moves every
/// registration to a new inner instance and drops the old one with its leftover.
struct Inner {
    outer: Outer,
    table: Mutex<Table>,
}

/// The registrations, by token and by descriptor.
struct Table {
    /// The inner instance.
    instance: Instance,
    tokens: HashMap<u64, Registration>,
    fds: HashMap<RawDescriptor, Watched>,
    /// The key of each watched descriptor's kernel entry, back to its number.
    keys: HashMap<u64, RawDescriptor>,
    /// The key of the next descriptor watched: never reused, so a report for a descriptor the set
    /// let go of is known for one.
    next_key: u64,
    /// The generation of the next registration made or changed.
    next_generation: u64,
    /// An entry the kernel would not take out may linger in the inner instance (the library
    /// closed its descriptor first): the set moves to a new one before it lets go of the table.
    leftover: bool,
    /// Numbers whose entry the kernel would not take out since the last move: an earlier file
    /// may still be there under the number (kept open by a duplicate), and come back under it,
    /// so that a change of the number's entry reaches that file's and the kernel takes it.
    /// Their changes look at the file first, as where the kernel does not check it.
    suspect: HashSet<RawDescriptor>,
    /// The highest number the kernel took a watch of: a new inner instance takes none at or
    /// below it where there is room (see [`Descriptors::move_to_new_instance`]).
    #[cfg(unix)]
    highest: RawDescriptor,
    /// The next move's inner instance, made ahead while there is room: a move at the limit of
    /// open files needs no new descriptor (the leftover it leaves would keep the set readable,
    /// and the pump running, until one was free). Its number has been the set's since before
    /// every watch after it, so it is none the library closed while watched.
    #[cfg(unix)]
    spare: Option<Instance>,
}

#[derive(Clone, Copy)]
struct Registration {
    fd: RawDescriptor,
    interest: Interest,
    /// Changed by a watch that moves or changes the registration, or makes it anew: an entry of
    /// an earlier `ready` with another one is not current ([`Descriptors::is_current`]).
    generation: u64,
}

/// A descriptor the set holds, with the registrations on it.
struct Watched {
    key: u64,
    tokens: Vec<u64>,
    /// What the kernel entry asks for: every registration's interest together, none if there is
    /// no entry.
    asked: Interest,
    /// The file the number named when it was handed to the kernel.
    #[cfg(unix)]
    file: Option<super::file_id::FileId>,
}

impl fmt::Debug for Descriptors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let table = self.table();
        f.debug_struct("Descriptors")
            .field("registrations", &table.tokens.len())
            .field("descriptors", &table.fds.len())
            .finish_non_exhaustive()
    }
}

/// The set itself: readable while any registration is ready, for
/// [`run_on_readable`](crate::Builder::run_on_readable).
#[cfg(unix)]
impl AsFd for Descriptors {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.outer.as_fd()
    }
}

/// The descriptors of the live sets' outer instances, by number: a pump given one of them
/// ([`run_on_readable`](crate::Builder::run_on_readable)) watches its own duplicate of a set,
/// whose identity needs no look-up entry (an extra nesting of the set, which would halve the
/// pumps the kernel allows per set and take room a set's move needs).
#[cfg(unix)]
fn live_sets() -> MutexGuard<'static, std::collections::BTreeSet<RawDescriptor>> {
    static LIVE: Mutex<std::collections::BTreeSet<RawDescriptor>> =
        Mutex::new(std::collections::BTreeSet::new());
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether `fd` is a live set's own descriptor (the caller holds the set, so the number cannot
/// change hands meanwhile).
#[cfg(unix)]
pub(crate) fn is_a_live_set(fd: RawDescriptor) -> bool {
    live_sets().contains(&fd)
}

/// The registrations left go out of the port first, so that its drop takes their cancelled
/// polls (see `Port`'s `Drop`).
#[cfg(windows)]
impl Drop for Inner {
    fn drop(&mut self) {
        let table = self.table.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (&socket, watched) in &table.fds {
            if !watched.asked.is_empty() {
                table.instance.delete(socket);
            }
        }
    }
}

#[cfg(unix)]
impl Drop for Inner {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // Before the outer instance closes: its number is free only once it is out of the list.
        live_sets().remove(&self.outer.as_fd().as_raw_fd());
    }
}

impl Descriptors {
    /// An empty set.
    ///
    /// For a loop that lives in the pump (`build`, spawned on any runtime): hand the set to
    /// [`run_on_readable`](crate::Builder::run_on_readable) — it is readable while any
    /// registration in it is ready — and move a clone into `run_once`. A loop on its own thread
    /// takes the pump's set from [`Setup::descriptors`](crate::Setup::descriptors) instead.
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
    /// use std::os::fd::AsRawFd;
    /// use std::os::unix::net::UnixStream;
    ///
    /// # futures_lite::future::block_on(async {
    /// let (socket, mut peer) = UnixStream::pair()?;
    /// let descriptors = Descriptors::new()?;
    /// descriptors.watch(socket.as_raw_fd(), Interest::READABLE, 0)?;
    /// let set = descriptors.clone();
    /// let pump = Pump::builder()
    ///     .run_on_readable(&descriptors)
    ///     .build(move || {
    ///         for ready in set.ready() {
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
        let (outer, instance) = Outer::new()?;
        #[cfg(unix)]
        live_sets().insert(std::os::fd::AsRawFd::as_raw_fd(&outer.as_fd()));
        Ok(Descriptors {
            inner: Arc::new(Inner {
                outer,
                table: Mutex::new(Table {
                    instance,
                    tokens: HashMap::new(),
                    fds: HashMap::new(),
                    keys: HashMap::new(),
                    next_key: 0,
                    next_generation: 0,
                    leftover: false,
                    suspect: HashSet::new(),
                    #[cfg(unix)]
                    highest: -1,
                    // Without one (out of descriptors already), the first move makes its own.
                    #[cfg(unix)]
                    spare: Instance::new().ok(),
                }),
            }),
        })
    }

    /// The table; a panic elsewhere while it was held left it whole (every change is made in
    /// the kernel first, then recorded).
    fn table(&self) -> MutexGuard<'_, Table> {
        self.inner
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `fd` for `interest` under `token`, or changes the registration `token` already
    /// names (another interest, or another descriptor).
    ///
    /// [`Interest::NONE`] keeps the registration without waiting on it. The library unwatches
    /// before it closes the descriptor (see "The library's part" above). Re-watching with what
    /// the registration already asks changes nothing in the kernel; on Unix it costs the look
    /// at whether the number still names the file watched (an `fstat`, and for what is not a
    /// socket an `epoll_ctl`).
    ///
    /// # Errors
    ///
    /// What the kernel says (`EBADF` for a closed descriptor, `EPERM` for a file it cannot poll,
    /// such as a regular file or `/dev/null`, `ELOOP` for the set itself, a set that watches
    /// this one, or epoll instances nested deeper than the kernel takes (the set nests two
    /// levels deep itself; Linux 6.18 takes an epoll instance that holds another one, and
    /// another set), `EINVAL` (`InvalidInput`) on Linux past the kernel's limit of wake-up paths
    /// through nested epoll instances (100 pumps given the set, see
    /// [`run_on_readable`](crate::Builder::run_on_readable)); `EBADF` for a negative number,
    /// whatever the interest; on Windows `WSAENOTSOCK` for `INVALID_SOCKET`);
    /// the set is left as it was — but for registrations on a number the library closed
    /// without unwatching, which go as the refusal tells that (see "The library's part") — and
    /// stays usable. The kernel hears only of what a
    /// registration waits on: with [`Interest::NONE`] alone on it, a number is not looked at
    /// until an interest is asked of it.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Descriptors, Interest};
    /// use std::os::fd::AsRawFd;
    /// use std::os::unix::net::UnixStream;
    ///
    /// let (socket, _peer) = UnixStream::pair()?;
    /// let descriptors = Descriptors::new()?;
    /// descriptors.watch(socket.as_raw_fd(), Interest::WRITABLE, 7)?;
    /// assert_eq!(descriptors.ready()[0].token(), 7);
    /// assert!(descriptors.watch(-1, Interest::READABLE, 8).is_err());
    /// assert_eq!(descriptors.len(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn watch(&self, fd: RawDescriptor, interest: Interest, token: u64) -> io::Result<()> {
        let mut table = self.table();
        let watched = self.watch_in(&mut table, fd, interest, token, false);
        self.settle(&mut table);
        watched
    }

    /// [`watch`](Descriptors::watch) with the table held; `force`: hands the descriptor to the
    /// kernel even if the registration is unchanged.
    fn watch_in(
        &self,
        table: &mut Table,
        fd: RawDescriptor,
        interest: Interest,
        token: u64,
        force: bool,
    ) -> io::Result<()> {
        check(fd)?;
        // The number was closed and names a new file: what was watched under it is gone (the
        // library closed without unwatching), and the new file is watched as new. Where the
        // kernel refuses to change an entry for another file, a change tells that below (a
        // refusal is looked into then); the look costs its system calls only when the entry
        // stays as it is.
        #[cfg(unix)]
        let looks_later = Instance::A_CHANGE_CHECKS_THE_FILE
            && !table.suspect.contains(&fd)
            && table.changes_entry(fd, token, interest, force);
        #[cfg(windows)]
        let looks_later = false;
        if table.fds.contains_key(&fd) && !looks_later && !table.names_its_file(fd) {
            table.let_go(fd);
            table.leftover = true;
        }
        let moved_from = match table.tokens.get(&token) {
            Some(old) if old.fd != fd => Some(old.fd),
            _ => None,
        };
        let asked = table.asked_with(fd, token, Some(interest));
        let in_the_kernel = table.fds.get(&fd).is_some_and(|w| !w.asked.is_empty());
        match self.apply(table, fd, asked, force) {
            // Its entry refused a change: closed, and perhaps taken by a new file, since the
            // look above — or, unlooked, by a file the kernel cannot poll (`EPERM`). As there,
            // the old file's registrations go, and this one is watched as new (a leftover of
            // the old file reports under a key the set no longer knows).
            Err(err)
                if in_the_kernel
                    && (names_another_file(&err) || (looks_later && !table.names_its_file(fd))) =>
            {
                table.let_go(fd);
                table.leftover = true;
                self.apply(table, fd, interest, force)?;
            }
            applied => applied?,
        }
        let generation = match table.tokens.get(&token) {
            Some(old) if old.fd == fd && old.interest == interest => old.generation,
            _ => {
                table.next_generation += 1;
                table.next_generation
            }
        };
        let registration = Registration {
            fd,
            interest,
            generation,
        };
        table.tokens.insert(token, registration);
        let watched = table.fds.get_mut(&fd).expect("applied above");
        if !watched.tokens.contains(&token) {
            watched.tokens.push(token);
        }
        // A number the kernel took, so open then: one a refusal named (a bogus number far up)
        // would put every new instance out of reach.
        #[cfg(unix)]
        if !watched.asked.is_empty() {
            table.highest = table.highest.max(fd);
        }
        match moved_from {
            Some(old) => self.detach(table, old, token),
            None => Ok(()),
        }
    }

    /// Removes the registration `token`; the descriptor stays watched for its other
    /// registrations. An unknown token is not an error.
    ///
    /// # Errors
    ///
    /// What the kernel says changing the descriptor's entry for the registrations left on it;
    /// the registration is gone from the set either way. Removing the descriptor's last
    /// registration never fails, also for a number the library closed already.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Descriptors, Interest};
    /// use std::os::fd::AsRawFd;
    /// use std::os::unix::net::UnixStream;
    ///
    /// let (socket, _peer) = UnixStream::pair()?;
    /// let descriptors = Descriptors::new()?;
    /// descriptors.watch(socket.as_raw_fd(), Interest::WRITABLE, 1)?;
    /// descriptors.unwatch(1)?;
    /// descriptors.unwatch(1)?; // unknown by now: not an error
    /// assert!(descriptors.is_empty() && descriptors.ready().is_empty());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn unwatch(&self, token: u64) -> io::Result<()> {
        let mut table = self.table();
        let unwatched = self.unwatch_in(&mut table, token);
        self.settle(&mut table);
        unwatched
    }

    /// [`unwatch`](Descriptors::unwatch) with the table held.
    fn unwatch_in(&self, table: &mut Table, token: u64) -> io::Result<()> {
        match table.tokens.remove(&token) {
            Some(registration) => self.detach(table, registration.fd, token),
            None => Ok(()),
        }
    }

    /// Watches exactly the descriptors listed, each registration's token its descriptor number
    /// (a descriptor listed twice is watched for both interests): for a library that hands its
    /// whole list out each time (GLib's `g_main_context_query`, libusb's pollfds). Every
    /// registration not listed goes. Each listed descriptor is handed to the kernel again, as
    /// `poll()` would be: one the library closed and reopened under the same number since the
    /// last list is watched as the file it is now.
    ///
    /// # Errors
    ///
    /// The first error of the kernel, once every other descriptor listed is watched: one the
    /// kernel refuses (a regular file, `/dev/null`: `EPERM`) keeps none of the others out.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Descriptors, Interest};
    /// use std::os::fd::AsRawFd;
    /// use std::os::unix::net::UnixStream;
    ///
    /// let (a, _a) = UnixStream::pair()?;
    /// let (b, _b) = UnixStream::pair()?;
    /// let (a, b) = (a.as_raw_fd(), b.as_raw_fd());
    /// let descriptors = Descriptors::new()?;
    /// descriptors.watch_only([(a, Interest::READABLE), (b, Interest::WRITABLE)])?;
    /// assert_eq!(descriptors.len(), 2);
    /// descriptors.watch_only([(b, Interest::WRITABLE)])?;
    /// assert_eq!(descriptors.watched(), [(b as u64, b, Interest::WRITABLE)]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn watch_only(
        &self,
        list: impl IntoIterator<Item = (RawDescriptor, Interest)>,
    ) -> io::Result<()> {
        // In the list's order, each descriptor once with what it is listed for together.
        let mut wanted: Vec<(RawDescriptor, Interest)> = Vec::new();
        let mut places: HashMap<RawDescriptor, usize> = HashMap::new();
        for (fd, interest) in list {
            match places.get(&fd) {
                Some(&place) => wanted[place].1 |= interest,
                None => {
                    places.insert(fd, wanted.len());
                    wanted.push((fd, interest));
                }
            }
        }
        // One hold of the table for the whole list: nobody sees the set half brought in line.
        let mut table = self.table();
        let gone: Vec<u64> = table
            .tokens
            .iter()
            .filter(|(&token, r)| token != number_token(r.fd) || !places.contains_key(&r.fd))
            .map(|(&token, _)| token)
            .collect();
        // A descriptor the kernel refuses keeps none of the others out.
        let mut first_error = None;
        for token in gone {
            if let Err(err) = self.unwatch_in(&mut table, token) {
                first_error.get_or_insert(err);
            }
        }
        for (fd, interest) in wanted {
            if let Err(err) = self.watch_in(&mut table, fd, interest, number_token(fd), true) {
                first_error.get_or_insert(err);
            }
        }
        self.settle(&mut table);
        first_error.map_or(Ok(()), Err)
    }

    /// The registrations, as `(token, descriptor, interest)`, in no particular order.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Descriptors, Interest};
    /// use std::os::fd::AsRawFd;
    /// use std::os::unix::net::UnixStream;
    ///
    /// let (socket, _peer) = UnixStream::pair()?;
    /// let fd = socket.as_raw_fd();
    /// let descriptors = Descriptors::new()?;
    /// descriptors.watch(fd, Interest::READABLE, 1)?;
    /// descriptors.watch(fd, Interest::NONE, 2)?;
    /// let mut watched = descriptors.watched();
    /// watched.sort_by_key(|&(token, _, _)| token);
    /// assert_eq!(watched, [(1, fd, Interest::READABLE), (2, fd, Interest::NONE)]);
    /// assert_eq!(descriptors.len(), 2); // registrations, not descriptors
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn watched(&self) -> Vec<(u64, RawDescriptor, Interest)> {
        self.table()
            .tokens
            .iter()
            .map(|(&token, r)| (token, r.fd, r.interest))
            .collect()
    }

    /// Whether the registration `ready` was found for is still the one under its token: not
    /// unwatched, nor moved to another descriptor, given another interest or made again since
    /// (re-watching with what it asks keeps it). For a library whose callbacks change the set
    /// while a run's list is handled ([`Run::ready`](crate::Run::ready) is the run's own): an
    /// entry a callback for an earlier one made stale — a watch freed or disabled, or freed and
    /// made again under a reused token (a watch's address) — is skipped, not handed to the
    /// library.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Descriptors, Interest};
    /// use std::os::fd::AsRawFd;
    /// use std::os::unix::net::UnixStream;
    ///
    /// let (socket, _peer) = UnixStream::pair()?;
    /// let descriptors = Descriptors::new()?;
    /// descriptors.watch(socket.as_raw_fd(), Interest::WRITABLE, 1)?;
    /// descriptors.watch(socket.as_raw_fd(), Interest::WRITABLE, 2)?;
    /// let ready = descriptors.ready();
    /// // Handling the first entry, the library disables the second watch.
    /// descriptors.watch(socket.as_raw_fd(), Interest::NONE, 2)?;
    /// let handed: Vec<u64> = (ready.iter())
    ///     .filter(|ready| descriptors.is_current(ready))
    ///     .map(|ready| ready.token())
    ///     .collect();
    /// assert_eq!(handed, [1]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_current(&self, ready: &Ready) -> bool {
        (self.table().tokens.get(&ready.token()))
            .is_some_and(|registration| registration.generation == ready.generation())
    }

    /// How many registrations the set holds.
    pub fn len(&self) -> usize {
        self.table().tokens.len()
    }

    /// Whether the set holds no registration.
    pub fn is_empty(&self) -> bool {
        self.table().tokens.is_empty()
    }

    /// The registrations that are ready now, and for what; asks the kernel without waiting.
    /// Call it in `run_once` (a loop on its own thread reads [`Run::ready`](crate::Run::ready)
    /// instead), then hand each to the library: the list is the caller's own, and the library's
    /// callbacks may watch and unwatch meanwhile.
    ///
    /// One call looks at no more than 4 096 descriptors. Those left over stay ready, so the set
    /// stays readable and a pump watching it runs again at once.
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
    /// let descriptors = Descriptors::new()?;
    /// descriptors.watch(socket.as_raw_fd(), Interest::READABLE, 9)?;
    /// peer.write_all(b"!")?;
    /// for ready in descriptors.ready() {
    ///     // The library's callback may change the set while it handles what is ready.
    ///     descriptors.unwatch(ready.token())?;
    /// }
    /// assert!(descriptors.is_empty());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn ready(&self) -> Vec<Ready> {
        let mut ready = Vec::new();
        self.ready_into(&mut ready);
        ready
    }

    /// [`ready`](Descriptors::ready) into a list the caller keeps from run to run (it is
    /// cleared first), so a busy loop does not allocate one each run.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Descriptors, Interest};
    /// use std::os::fd::AsRawFd;
    /// use std::os::unix::net::UnixStream;
    ///
    /// let (socket, _peer) = UnixStream::pair()?;
    /// let descriptors = Descriptors::new()?;
    /// descriptors.watch(socket.as_raw_fd(), Interest::WRITABLE, 1)?;
    /// let mut ready = Vec::new(); // kept from run to run
    /// descriptors.ready_into(&mut ready);
    /// descriptors.ready_into(&mut ready);
    /// assert_eq!(ready.len(), 1, "cleared, then filled");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn ready_into(&self, ready: &mut Vec<Ready>) {
        ready.clear();
        let mut table = self.table();
        let capacity = table.fds.len().clamp(1, 4096);
        let mut leftover = false;
        let mut closed = Vec::new();
        table.instance.wait(capacity, |key, found| {
            let Some(&fd) = table.keys.get(&key) else {
                leftover = true;
                return;
            };
            // Out of the kernel as far as the set knows: an entry it could not take out.
            if table.fds[&fd].asked.is_empty() {
                leftover = true;
                return;
            }
            if !table.names_its_file(fd) {
                closed.push(fd);
                return;
            }
            for token in &table.fds[&fd].tokens {
                let registration = &table.tokens[token];
                if let Some(found) = found.for_interest(registration.interest) {
                    ready.push(Ready::new(*token, fd, found, registration.generation));
                }
            }
        });
        for fd in closed {
            table.let_go(fd);
            leftover = true;
        }
        // On Windows a socket's registration goes with its handle: a leftover is a report fetched
        // before the library unwatched, skipped above, and the port stays (`settle` does
        // nothing there).
        table.leftover |= leftover;
        self.settle(&mut table);
    }

    /// Moves to a new inner instance if an entry the kernel would not take out may linger in
    /// this one. Failing (out of descriptors), it is tried again at the next change or report.
    fn settle(&self, table: &mut Table) {
        #[cfg(unix)]
        if std::mem::take(&mut table.leftover) && self.move_to_new_instance(table).is_err() {
            table.leftover = true;
        }
        #[cfg(windows)]
        let _ = table;
    }

    /// Moves every registration to a new inner instance, so the old one goes with the leftover
    /// of a descriptor closed while watched (see "The library's part").
    #[cfg(unix)]
    fn move_to_new_instance(&self, table: &mut Table) -> io::Result<()> {
        // Above every number the kernel took a watch of: the kernel hands out the lowest free
        // number, and a move follows one the library closed while watched. A library that lists
        // it again (GLib's query lists what its sources hold) must find it closed, as `poll()`
        // would (`POLLNVAL`), not the set's own instance under it, which looks ready whenever a
        // registration is (a probe saw a GLib watch on a closed number told `G_IO_IN`).
        let instance = match table.spare.take() {
            Some(spare) => spare,
            None => Instance::new_above(table.highest)?,
        };
        // A number that no longer names its file (asked of the old instance) is let go of, not
        // handed to the new one as the file it names now.
        let gone: Vec<RawDescriptor> = (table.fds.iter())
            .filter(|(&fd, watched)| !watched.asked.is_empty() && !table.names_its_file(fd))
            .map(|(&fd, _)| fd)
            .collect();
        for fd in gone {
            table.let_go(fd);
        }
        let (mut moved, mut closed_meanwhile) = (Vec::new(), Vec::new());
        for (&fd, watched) in &table.fds {
            if watched.asked.is_empty() {
                continue;
            }
            match instance.control(true, fd, watched.key, watched.asked) {
                Ok(()) => moved.push(fd),
                // Closed since the look above: let go of, as there.
                Err(err) if names_another_file(&err) => closed_meanwhile.push(fd),
                // Refused for good (out of watches, past the kernel's nesting limits): left out,
                // as a move that stopped here would leave the leftover reporting for ever.
                Err(_) => {}
            }
        }
        for fd in closed_meanwhile {
            table.let_go(fd);
        }
        // Out of the old instance before the new one joins the outer one: in both at once, each
        // moved descriptor would count twice against the kernel's limit of wake-up paths through
        // nested epoll instances (each pump given the set adds its own), and with a few dozen
        // pumps the kernel refused the new one (`EINVAL`), leaving the old one with its
        // leftover always ready: every pump spun. Level-triggered, nothing ready is missed.
        // No pump is registered meanwhile (see `nesting`).
        let _nesting = super::nesting();
        for &fd in &moved {
            table.instance.delete(fd);
        }
        if let Err(err) = self.inner.outer.swap(&table.instance, &instance) {
            // Back where they were, for the next try.
            for &fd in &moved {
                let watched = &table.fds[&fd];
                let _ = (table.instance).control(true, fd, watched.key, watched.asked);
            }
            return Err(err);
        }
        table.instance = instance;
        // Nothing of the old instance is left to come back.
        table.suspect.clear();
        // Kept only above every number the library watched: with no room there, one under the
        // kernel's numbers may be one the library closed, and the next move makes its own.
        let highest = table.highest;
        table.spare = Instance::new_above(highest)
            .ok()
            .filter(|spare| spare.is_above(highest));
        Ok(())
    }

    /// Takes `token` off `fd`'s list (the registration itself is gone or moved), and the
    /// descriptor out of the kernel's set once nothing is registered on it.
    fn detach(&self, table: &mut Table, fd: RawDescriptor, token: u64) -> io::Result<()> {
        let asked = table.asked_with(fd, token, None);
        let watched = table
            .fds
            .get_mut(&fd)
            .expect("a registration's descriptor is held");
        watched.tokens.retain(|&t| t != token);
        if !watched.tokens.is_empty() {
            return match self.apply(table, fd, asked, false) {
                // The library closed the descriptor first: the other registrations on it go too,
                // as if unwatched, rather than watch what the number names now — also a number
                // a file the kernel cannot poll took (`EPERM`), as any refusal is looked into.
                Err(err) if names_another_file(&err) || !table.names_its_file(fd) => {
                    table.let_go(fd);
                    table.leftover = true;
                    Ok(())
                }
                applied => applied,
            };
        }
        let watched = table.fds.remove(&fd).expect("held");
        table.keys.remove(&watched.key);
        if !watched.asked.is_empty() && take_out(&table.instance, &mut table.suspect, fd) {
            table.leftover = true;
        }
        Ok(())
    }

    /// Brings the kernel's entry for `fd` to ask for `asked`, making the descriptor's record if
    /// it has none. An entry made anew gets a key never used before: a leftover the kernel kept
    /// of an earlier file under the number (the set could not take it out) reports under the
    /// old key, which the set then knows for one.
    fn apply(
        &self,
        table: &mut Table,
        fd: RawDescriptor,
        asked: Interest,
        force: bool,
    ) -> io::Result<()> {
        let Table {
            instance,
            fds,
            keys,
            next_key,
            suspect,
            leftover,
            ..
        } = table;
        let (old_key, before) = match fds.get(&fd) {
            Some(watched) => (Some(watched.key), watched.asked),
            None => (None, Interest::NONE),
        };
        let anew = before.is_empty() && !asked.is_empty();
        let key = match old_key {
            Some(key) if !anew => key,
            _ => *next_key,
        };
        match (before.is_empty(), asked.is_empty()) {
            (true, true) => {}
            (true, false) => {
                // A descriptor added to an instance nested in reactors takes room under the
                // kernel's nesting limits (only an add is counted): not while any set moves (see
                // `nesting`), this one or another watching the same descriptor.
                #[cfg(unix)]
                let _nesting = super::nesting();
                instance.control(true, fd, key, asked)?
            }
            // The port knows a socket by its number alone, and its entry may be a closed
            // socket's (closed without unwatching, its poll failed or ended), which a change
            // would only modify: handed again, the number is given to the port anew, as the
            // socket it names now.
            #[cfg(windows)]
            (false, false) if force => instance.renew(fd, key, asked)?,
            (false, false) if before != asked || force => {
                instance.control(false, fd, key, asked)?
            }
            (false, false) => {}
            (false, true) => *leftover |= take_out(instance, suspect, fd),
        }
        if old_key != Some(key) {
            if let Some(old_key) = old_key {
                keys.remove(&old_key);
            }
            keys.insert(key, fd);
            *next_key += 1;
        }
        let watched = fds.entry(fd).or_insert_with(|| Watched {
            key,
            tokens: Vec::new(),
            asked,
            #[cfg(unix)]
            file: None,
        });
        watched.key = key;
        // The file the kernel watches from now on, for `Table::names_its_file` (a forced change
        // the kernel made for the same file keeps it).
        #[cfg(unix)]
        if !asked.is_empty()
            && (before.is_empty() || (force && !Instance::A_CHANGE_CHECKS_THE_FILE))
        {
            watched.file = super::file_id::FileId::of(fd);
        }
        watched.asked = asked;
        Ok(())
    }
}

#[cfg(windows)]
impl Descriptors {
    /// The completion port, for the loop's thread to sleep on.
    pub(super) fn port(&self) -> Arc<super::kernel::Port> {
        self.inner.outer.port().clone()
    }
}

impl Table {
    /// Whether the held descriptor `fd` still names the file this set's entry watches: a report
    /// for a number the library closed without unwatching (its file kept open by a duplicate
    /// elsewhere), or that names another file by now, is not the library's descriptor's.
    fn names_its_file(&self, fd: RawDescriptor) -> bool {
        #[cfg(unix)]
        {
            let watched = &self.fds[&fd];
            // Not in the kernel (asked for nothing): no report can come for it, and the watch
            // that asks for something again hands the kernel the file the number names then.
            let Some(file) = watched.file.filter(|_| !watched.asked.is_empty()) else {
                return true;
            };
            // A socket's identity is its own; any other may be shared by a new open file, which
            // the kernel's entry tells apart.
            super::file_id::FileId::of(fd) == Some(file)
                && (file.is_a_socket() || self.instance.still_holds(fd, watched.key, watched.asked))
        }
        #[cfg(windows)]
        {
            let _ = fd;
            true
        }
    }

    /// Forgets `fd` and every registration on it, as if each was unwatched, without asking the
    /// kernel: its number no longer names the file watched (the move to a new instance leaves
    /// that file behind).
    fn let_go(&mut self, fd: RawDescriptor) {
        if let Some(watched) = self.fds.remove(&fd) {
            self.keys.remove(&watched.key);
            for token in watched.tokens {
                self.tokens.remove(&token);
            }
        }
    }

    /// Whether watching `fd` for `interest` under `token` (`force`: handed to the kernel again)
    /// modifies the kernel's entry for it, rather than make, delete or keep it.
    #[cfg(unix)]
    fn changes_entry(
        &self,
        fd: RawDescriptor,
        token: u64,
        interest: Interest,
        force: bool,
    ) -> bool {
        let before = self.fds.get(&fd).map_or(Interest::NONE, |w| w.asked);
        let asked = self.asked_with(fd, token, Some(interest));
        !before.is_empty() && !asked.is_empty() && (force || asked != before)
    }

    /// What the registrations on `fd` ask for together, with `token`'s interest replaced
    /// (`None`: left out).
    fn asked_with(&self, fd: RawDescriptor, token: u64, interest: Option<Interest>) -> Interest {
        let others = self.fds.get(&fd).map_or(&[][..], |w| &w.tokens[..]);
        let mut asked = interest.unwrap_or_default();
        for other in others.iter().filter(|&&t| t != token) {
            asked |= self.tokens[other].interest;
        }
        asked
    }
}

/// The token [`Descriptors::watch_only`] gives a descriptor: its number.
#[allow(clippy::unnecessary_cast)] // a `u64` already on Windows, an `i32` on Unix
fn number_token(fd: RawDescriptor) -> u64 {
    fd as u64
}

/// Takes `fd`'s entry out of the kernel's set; `true` if the kernel refused. Refused, the kernel
/// may keep an earlier file's entry under the number (a duplicate keeps the file open), which
/// keeps reporting — the set is readable for it, and a loop that does not ask what is ready
/// would run again and again (found by a probe: ~200 000 runs a second) — and would take a later
/// change of that file, back under the number, for the set's own: the number is marked, such
/// changes look at the file first, and the caller has the set move to a new instance.
fn take_out(instance: &Instance, suspect: &mut HashSet<RawDescriptor>, fd: RawDescriptor) -> bool {
    let refused = instance.delete(fd);
    if refused {
        suspect.insert(fd);
    }
    refused
}

/// Whether the kernel refused to change an entry because the number no longer names the file it
/// was made for: closed (`EBADF`), or another file now (`ENOENT`).
fn names_another_file(err: &io::Error) -> bool {
    #[cfg(unix)]
    {
        let refused = err.raw_os_error();
        refused == Some(rustix::io::Errno::BADF.raw_os_error())
            || refused == Some(rustix::io::Errno::NOENT.raw_os_error())
    }
    #[cfg(windows)]
    {
        let _ = err;
        false
    }
}

/// Refuses a number that names no descriptor at all before the kernel sees it, with the error
/// the kernel gives for one that is not open.
fn check(fd: RawDescriptor) -> io::Result<()> {
    #[cfg(unix)]
    if fd < 0 {
        return Err(rustix::io::Errno::BADF.into());
    }
    // `INVALID_SOCKET`; `WSAENOTSOCK`.
    #[cfg(windows)]
    if fd == RawDescriptor::MAX {
        return Err(io::Error::from_raw_os_error(10038));
    }
    Ok(())
}
