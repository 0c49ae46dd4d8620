//! [`Setup`]: what the factory of a loop on its own thread is handed.

use std::fmt;
use std::sync::Arc;

use crate::core::Core;
use crate::Kicker;

/// The error a factory returns: any error, boxed (`?` on any `std::error::Error` makes one).
///
/// # Examples
///
/// ```
/// use ffi_pump::{Error, FactoryError, Pump};
///
/// fn open_device(path: &str) -> Result<std::fs::File, FactoryError> {
///     Ok(std::fs::File::open(path)?) // an io::Error becomes a FactoryError
/// }
/// let built = Pump::builder()
///     .build_with_state(|_setup| open_device("/no/such/device"), |_device, _run| None);
/// let Err(Error::Factory(why)) = built else { panic!("the factory failed") };
/// let io = why.downcast_ref::<std::io::Error>().expect("the factory's own error");
/// assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
/// ```
pub type FactoryError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the factory of a loop on its own thread is handed
/// ([`Builder::build_with_state`](crate::Builder::build_with_state)): the pump's parts the
/// loop's state may keep.
///
/// # Examples
///
/// ```
/// use ffi_pump::{Kicker, Pump};
///
/// # futures_lite::future::block_on(async {
/// struct Library {
///     kicker: Kicker, // for a C callback that queued work: kicks, never keeps the pump alive
/// }
/// let (pump, library) = Pump::builder().build_with_state(
///     |setup| Ok(Library { kicker: setup.kicker() }),
///     |_library, _run| None,
/// )?;
/// assert!(library.call(|library| library.kicker.kick()).await?);
/// drop((pump, library)); // the pump closes although its state holds a kicker
/// # Ok::<(), ffi_pump::Error>(())
/// # }).unwrap();
/// ```
pub struct Setup {
    core: Arc<Core>,
    pub(crate) descriptors: Option<crate::Descriptors>,
    pub(crate) timeouts: Option<crate::Timeouts>,
}

impl fmt::Debug for Setup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Setup")
            .field("name", &self.core.name)
            .finish_non_exhaustive()
    }
}

impl Setup {
    pub(crate) fn new(core: Arc<Core>) -> Setup {
        Setup {
            core,
            descriptors: None,
            timeouts: None,
        }
    }

    /// A [`Kicker`] for the pump, for the state or a C callback to keep: it asks for a run and
    /// never keeps the pump alive.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Kicker, Pump};
    ///
    /// # futures_lite::future::block_on(async {
    /// let (pump, library) =
    ///     Pump::builder().build_with_state(|setup| Ok(setup.kicker()), |_kicker: &mut Kicker, _run| None)?;
    /// let kicked = library.call(|kicker| kicker.kick()).await?;
    /// assert!(kicked); // the pump is open
    /// drop((pump, library));
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn kicker(&self) -> Kicker {
        Kicker::new(&self.core)
    }

    /// The pump's descriptor set, made on the first call (each call hands a clone of the same
    /// set): the pump runs the loop whenever a registration in it is ready, and
    /// [`Run::ready`](crate::Run::ready) hands what is. For a library that asks its loop to watch
    /// descriptors (libcurl's socket callback, D-Bus watches, GLib's `GPollFD`s, libusb's
    /// pollfds). Every Unix (epoll on Linux and Android, kqueue or event ports elsewhere), and
    /// Windows (sockets on an I/O completion port the loop's thread sleeps on: see
    /// [`Descriptors`](crate::Descriptors), "Platforms").
    ///
    /// # Errors
    ///
    /// What the kernel says if the set cannot be made; `InvalidInput` if the pump was given a
    /// descriptor with [`run_on_readable`](crate::Builder::run_on_readable), its one trigger
    /// already: watch that descriptor in the set instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::{Completions, Interest, Pump};
    /// use std::io::{Read, Write};
    /// use std::os::fd::AsRawFd;
    /// use std::os::unix::net::UnixStream;
    /// use std::time::Duration;
    ///
    /// # futures_lite::future::block_on(async {
    /// let (socket, mut peer) = UnixStream::pair()?;
    /// socket.set_nonblocking(true)?;
    /// let received = Completions::new();
    /// let table = received.clone();
    /// let (pump, _socket) = Pump::builder().build_with_state(
    ///     move |setup| {
    ///         setup.descriptors()?.watch(socket.as_raw_fd(), Interest::READABLE, 0)?;
    ///         Ok(socket)
    ///     },
    ///     move |socket, run| {
    ///         if run.ready().iter().any(|ready| ready.is_readable()) {
    ///             let mut data = vec![0; 64];
    ///             let n = socket.read(&mut data).unwrap_or(0);
    ///             data.truncate(n);
    ///             table.complete(1, data);
    ///         }
    ///         None // no deadline of its own: it runs when its socket is ready
    ///     },
    /// )?;
    /// peer.write_all(b"hello")?;
    /// let data = pump.wait_key(&received, 1).timeout(Duration::from_secs(2)).await?;
    /// assert_eq!(data, b"hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn descriptors(&mut self) -> std::io::Result<crate::Descriptors> {
        if self.core.trigger.is_some() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "run_on_readable gave this pump its trigger already: watch that descriptor in \
                 the set instead",
            ));
        }
        if self.descriptors.is_none() {
            self.descriptors = Some(crate::Descriptors::new()?);
        }
        Ok(self.descriptors.clone().expect("made above"))
    }

    /// The loop's [`Timeouts`](crate::Timeouts), for a library that asks its host for timeouts
    /// (D-Bus, Avahi, c-ares): the loop runs when the first falls due, and
    /// [`Run::expired`](crate::Run::expired) hands those whose time came. Made on the first
    /// call; later calls hand the same timeouts.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Pump;
    /// use std::time::{Duration, Instant};
    ///
    /// # futures_lite::future::block_on(async {
    /// let (_pump, library) = Pump::builder().build_with_state(
    ///     |setup| {
    ///         let timeouts = setup.timeouts();
    ///         timeouts.set(1, Instant::now() + Duration::from_secs(60)); // timeout_new()
    ///         Ok(timeouts)
    ///     },
    ///     |_, _| None,
    /// )?;
    /// assert_eq!(library.call(|timeouts| timeouts.len()).await?, 1);
    /// # Ok::<(), ffi_pump::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn timeouts(&mut self) -> crate::Timeouts {
        let kicker = self.kicker();
        (self
            .timeouts
            .get_or_insert_with(|| crate::Timeouts::new(kicker)))
        .clone()
    }
}
