//! [`Run`]: what a loop on its own thread is told about each run.

use std::fmt;

use crate::Cause;

/// What `run_once` of a loop on its own thread is told about this run
/// ([`Builder::build_with_state`](crate::Builder::build_with_state)): why it happens, whether the
/// deadline it reported came, and which of its descriptors are ready — so a binding of a library
/// with one timer (curl's) keeps no deadline of its own, one with many sets them in the loop's
/// [`Timeouts`](crate::Timeouts) and is handed those that fell due, and none asks the set
/// itself.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Cause, Pump};
/// use std::time::{Duration, Instant};
///
/// # futures_lite::future::block_on(async {
/// let due = Instant::now() + Duration::from_millis(20);
/// let (pump, timers) = Pump::builder().build_with_state(
///     |_setup| Ok(0_u32),
///     move |fired: &mut u32, run| {
///         if run.deadline_passed() {
///             // libcurl: curl_multi_socket_action(CURL_SOCKET_TIMEOUT)
///             *fired += 1;
///         }
///         let _why: Cause = run.cause(); // here a kick (the first wait), then the deadline
///         (*fired == 0).then_some(due)
///     },
/// )?;
/// pump.wait_for(|| None::<()>).timeout(Duration::from_millis(100)).await.ok();
/// assert_eq!(timers.call(|fired| *fired).await?, 1);
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
pub struct Run<'a> {
    cause: Cause,
    deadline_passed: bool,
    pub(crate) set: Option<&'a crate::Descriptors>,
    pub(crate) ready: std::cell::OnceCell<Vec<crate::Ready>>,
    pub(crate) spare: std::cell::Cell<Vec<crate::Ready>>,
    pub(crate) timeouts: Option<&'a crate::Timeouts>,
}

impl fmt::Debug for Run<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("cause", &self.cause)
            .field("deadline_passed", &self.deadline_passed)
            .finish_non_exhaustive()
    }
}

impl<'a> Run<'a> {
    pub(crate) fn new(cause: Cause, deadline_passed: bool) -> Run<'a> {
        Run {
            cause,
            deadline_passed,
            set: None,
            ready: std::cell::OnceCell::new(),
            spare: std::cell::Cell::new(Vec::new()),
            timeouts: None,
        }
    }

    /// Why the pump runs the loop now. One run may serve several causes (a kick that comes as the
    /// deadline passes): this is the one that woke the pump; [`deadline_passed`](Run::deadline_passed)
    /// and [`ready`](Run::ready) say the rest.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Cause, Pump};
    ///
    /// # futures_lite::future::block_on(async {
    /// let (_pump, causes) = Pump::builder().build_with_state(
    ///     |_setup| Ok(Vec::new()),
    ///     |causes: &mut Vec<Cause>, run| causes.push(run.cause()),
    /// )?;
    /// causes.post(|_| {})?; // a post kicks the loop's thread
    /// let seen = causes.call(|causes| causes.clone()).await?;
    /// assert!(seen.iter().all(|&cause| cause == Cause::Kick), "{seen:?}");
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn cause(&self) -> Cause {
        self.cause
    }

    /// Whether the deadline `run_once` reported last ([`Next::At`](crate::Next::At)) has come,
    /// whatever woke the pump: the library's timers are due (libcurl's
    /// `CURL_SOCKET_TIMEOUT`, GLib's timeouts). The pump never runs the loop before that
    /// deadline for its sake.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::time::{Duration, Instant};
    ///
    /// # futures_lite::future::block_on(async {
    /// let due = Instant::now() + Duration::from_millis(10);
    /// let (pump, fired) = Pump::builder().build_with_state(
    ///     |_setup| Ok(false),
    ///     move |fired: &mut bool, run| {
    ///         *fired |= run.deadline_passed(); // the library's timers are due
    ///         (!*fired).then_some(due)
    ///     },
    /// )?;
    /// let table = fired.clone();
    /// let waited = pump.wait_for(|| None::<()>).timeout(Duration::from_millis(100)).await;
    /// assert!(waited.is_err()); // timed out; meanwhile the deadline came
    /// assert!(table.call(|fired| *fired).await?);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn deadline_passed(&self) -> bool {
        self.deadline_passed
    }

    /// The registrations of the pump's descriptor set ([`Setup::descriptors`](crate::Setup::descriptors))
    /// that are ready, asked of the kernel on the first call in this run (later calls hand the
    /// same list). Empty without a set. The list is the run's own: the library's callbacks may
    /// watch and unwatch in the set while it is handled, so an entry may name a registration
    /// that a callback for an earlier entry removed or changed — or, if the binding reuses
    /// tokens (a freed watch's address), one made since under the same token: skip the entries
    /// [`Descriptors::is_current`](crate::Descriptors::is_current) says are stale.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Interest, Pump};
    /// use std::io::Write;
    /// use std::os::fd::AsRawFd;
    /// use std::os::unix::net::UnixStream;
    ///
    /// # futures_lite::future::block_on(async {
    /// let (socket, mut peer) = UnixStream::pair()?;
    /// let (pump, tokens) = Pump::builder().build_with_state(
    ///     move |setup| {
    ///         setup.descriptors()?.watch(socket.as_raw_fd(), Interest::READABLE, 7)?;
    ///         Ok((socket, Vec::new()))
    ///     },
    ///     |(_, tokens): &mut (UnixStream, Vec<u64>), run| {
    ///         tokens.extend(run.ready().iter().map(|ready| ready.token()));
    ///         None
    ///     },
    /// )?;
    /// peer.write_all(b"!")?;
    /// while tokens.call(|(_, tokens)| tokens.is_empty()).await? {
    ///     pump.turn().await?;
    /// }
    /// assert_eq!(tokens.call(|(_, tokens)| tokens[0]).await?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn ready(&self) -> &[crate::Ready] {
        self.ready.get_or_init(|| {
            let mut ready = self.spare.take();
            match self.set {
                Some(set) => set.ready_into(&mut ready),
                None => ready.clear(),
            }
            ready
        })
    }

    /// The tokens of the loop's [`Timeouts`](crate::Timeouts) that fell due by this run's start,
    /// earliest first, each taken out of the timeouts as the iterator hands it: one that a
    /// handler for an earlier token removed or set again meanwhile (D-Bus's `remove_timeout`,
    /// a token reused for a new timeout) is not handed. Take them all: those the run does not
    /// take are handed at the next run, earliest first with those due since, but bring none
    /// (a loop that never took them would run again and again), and
    /// [`Timeouts::first`](crate::Timeouts::first) and `len` count them until then. Empty
    /// without timeouts.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::time::Instant;
    ///
    /// # futures_lite::future::block_on(async {
    /// let (pump, library) = Pump::builder().build_with_state(
    ///     |setup| Ok((setup.timeouts(), Vec::new())),
    ///     |(timeouts, fired): &mut (ffi_pump::Timeouts, Vec<u64>), run| {
    ///         for token in run.expired() {
    ///             fired.push(token);
    ///             timeouts.remove(4); // the library frees another timeout: not handed
    ///         }
    ///         None
    ///     },
    /// )?;
    /// library
    ///     .call(|(timeouts, _)| {
    ///         timeouts.set(3, Instant::now()); // due at once
    ///         timeouts.set(4, Instant::now());
    ///     })
    ///     .await?;
    /// pump.turn().await?;
    /// let fired = library.call(|(timeouts, fired)| (timeouts.len(), fired.clone())).await?;
    /// assert_eq!(fired, (0, vec![3]));
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn expired(&self) -> crate::Expired<'_> {
        crate::Expired {
            timeouts: self.timeouts,
        }
    }
}
