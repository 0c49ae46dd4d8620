//! Spawn glue: one file per runtime, and the rule that picks one.

#[cfg(feature = "async-std")]
mod async_std;
#[cfg(feature = "smol")]
mod smol;
pub(crate) mod thread;
#[cfg(feature = "tokio")]
mod tokio;

use crate::{Driver, Error};

/// Where [`Pump::spawn_on`](crate::Pump::spawn_on) runs the pump future.
///
/// [`Pump::spawn`](crate::Pump::spawn) picks one with [`Backend::detect`].
///
/// # Examples
///
/// ```
/// use ffi_pump::{Backend, Pump};
///
/// let pump = Pump::new(|| {});
/// // A dedicated thread works with any feature set, with no runtime at all.
/// pump.spawn_on(Backend::Thread)?;
/// # Ok::<(), ffi_pump::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// A detached task on smol's global executor (feature `smol`).
    Smol,
    /// A detached async-std task (feature `async-std`).
    AsyncStd,
    /// A detached task on the current tokio runtime (feature `tokio`, inside a runtime that is
    /// not shut down).
    ///
    /// The task runs only while that runtime is driven: on a current-thread runtime, while its
    /// `block_on` runs. Once that returns, nothing drives the pump, yet it counts as driven:
    /// waits made elsewhere get no run (they end at their timeout) until the runtime is driven
    /// again — give it another driver ([`Thread`](Backend::Thread) stands by and takes over
    /// only once this one is dropped, with its runtime), or keep such a runtime driven.
    Tokio,
    /// A dedicated thread named `ffi-pump-driver`, driving the pump with `async_io::block_on`
    /// (always available).
    Thread,
}

impl Backend {
    /// The backend [`Pump::spawn`](crate::Pump::spawn) uses when called here, by this rule:
    ///
    /// 1. `Tokio` if the `tokio` feature is on and this thread is inside a tokio runtime that
    ///    is not shut down;
    /// 2. else `Smol` if the `smol` feature is on;
    /// 3. else `AsyncStd` if the `async-std` feature is on;
    /// 4. else `Thread`.
    ///
    /// The rule makes features additive: turning on `tokio` somewhere in a dependency graph
    /// never moves a smol or async-std user's pump onto tokio, since outside a tokio runtime
    /// rule 1 does not apply.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Backend;
    ///
    /// // Outside any tokio runtime, with the default features:
    /// # #[cfg(feature = "smol")]
    /// assert_eq!(Backend::detect(), Backend::Smol);
    /// ```
    pub fn detect() -> Backend {
        #[cfg(feature = "tokio")]
        if tokio::is_available() {
            return Backend::Tokio;
        }
        if cfg!(feature = "smol") {
            Backend::Smol
        } else if cfg!(feature = "async-std") {
            Backend::AsyncStd
        } else {
            Backend::Thread
        }
    }

    /// Whether [`Pump::spawn_on`](crate::Pump::spawn_on) can use this backend here: its feature is
    /// compiled in, and for tokio, this thread is inside a tokio runtime that takes tasks (not
    /// one shut down whose handle is still entered: it would drop the pump's driver as it is
    /// spawned, which closes the pump). For tokio it spawns a no-op task to tell.
    ///
    /// # Examples
    ///
    /// ```
    /// use ffi_pump::Backend;
    ///
    /// assert!(Backend::Thread.is_available());
    /// // Outside a runtime tokio has nowhere to spawn, whatever the features.
    /// assert!(!Backend::Tokio.is_available());
    /// ```
    pub fn is_available(self) -> bool {
        match self {
            Backend::Smol => cfg!(feature = "smol"),
            Backend::AsyncStd => cfg!(feature = "async-std"),
            #[cfg(feature = "tokio")]
            Backend::Tokio => tokio::is_available(),
            #[cfg(not(feature = "tokio"))]
            Backend::Tokio => false,
            Backend::Thread => true,
        }
    }
}

impl Backend {
    /// How the pump's span names the backend that drives it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Backend::Smol => "smol",
            Backend::AsyncStd => "async-std",
            Backend::Tokio => "tokio",
            Backend::Thread => "thread",
        }
    }
}

/// Spawns `run` detached on `backend`, which the caller found available.
pub(crate) fn spawn(backend: Backend, run: Driver) -> Result<(), Error> {
    match backend {
        #[cfg(feature = "smol")]
        Backend::Smol => smol::spawn(run)?,
        #[cfg(feature = "async-std")]
        Backend::AsyncStd => async_std::spawn(run)?,
        #[cfg(feature = "tokio")]
        Backend::Tokio => tokio::spawn(run),
        Backend::Thread => thread::spawn(run)?,
        #[allow(unreachable_patterns)]
        _ => return Err(Error::BackendUnavailable(backend)),
    }
    Ok(())
}

/// Runs a runtime's spawn, which panics where the system refuses the threads it starts on its
/// first spawn: [`Error::ThreadSpawn`] then (the runtime does not say why).
#[cfg(any(feature = "smol", feature = "async-std"))]
fn caught_refusal(spawn: impl FnOnce()) -> Result<(), Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(spawn)).map_err(|payload| {
        crate::unwind::forget_payload(payload);
        Error::ThreadSpawn(std::io::ErrorKind::Other)
    })
}
