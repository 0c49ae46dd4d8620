//! The readiness trigger of a pump on Unix: a duplicate of a descriptor (the C library's, given
//! to [`Builder::run_on_readable`](crate::Builder::run_on_readable), or the loop's own set),
//! watched with async-io (or with tokio's reactor when the pump runs on tokio), and a way to
//! notice when the library closed its own.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use super::file_id::FileId;
use super::kernel::Instance;
use super::ready::Interest;
use crate::reactor::Async;

use crate::Error;

/// The library's descriptor as given: its number and the file it referred to.
///
/// Our duplicate keeps the file open after the library closes its descriptor, so readiness alone
/// cannot tell; the number is looked up again after each readiness.
#[derive(Debug, Clone)]
struct Origin {
    fd: RawFd,
    file: FileId,
    /// For what is not a socket (an eventfd, a timerfd, a FIFO: a new open file may share the
    /// inode), a kernel entry made for the library's file under its number, which the kernel
    /// refuses to change once the number names another file.
    entry: Option<Arc<Instance>>,
}

impl Origin {
    /// `Err` when the kernel entry a file that is not a socket needs cannot be made (no
    /// descriptor free): without it a new file under the number would go unnoticed.
    fn of(fd: &impl AsFd) -> io::Result<Option<Origin>> {
        let fd = fd.as_fd().as_raw_fd();
        let Some(file) = FileId::of(fd) else {
            return Ok(None);
        };
        let entry = match file.is_a_socket() {
            true => None,
            false => Some(Instance::new()?),
        };
        // Nests what it watches (a set's duplicate, say): not while a set moves (see `nesting`).
        let entry = entry
            .filter(|entry| {
                let _nesting = super::nesting();
                entry.control(true, fd, 0, Interest::READABLE).is_ok()
            })
            .map(Arc::new);
        Ok(Some(Origin { fd, file, entry }))
    }

    /// Whether the library's descriptor number still refers to the same file.
    fn is_open(&self) -> bool {
        FileId::of(self.fd) == Some(self.file)
            && (self.entry.as_ref())
                .is_none_or(|entry| entry.still_holds(self.fd, 0, Interest::READABLE))
    }
}

/// What [`Builder::run_on_readable`](crate::Builder::run_on_readable) keeps: a duplicate, or why
/// there is none.
#[derive(Debug, Clone)]
pub(crate) struct TriggerFd {
    duplicate: Result<Arc<OwnedFd>, io::ErrorKind>,
    origin: Option<Origin>,
}

impl TriggerFd {
    pub(crate) fn new(fd: impl AsFd) -> TriggerFd {
        let mut trigger = TriggerFd::owned(&fd);
        // A set given to the pump (`run_on_readable(&set)`) is watched through its own
        // duplicate, as a loop's own set is: nothing to look up after each readiness (a set
        // dropped by its owner is never readable again).
        let a_set = super::set::is_a_live_set(fd.as_fd().as_raw_fd());
        if trigger.duplicate.is_ok() && !a_set {
            match Origin::of(&fd) {
                Ok(origin) => trigger.origin = origin,
                // Refused as a duplicate refused is: `build` says why.
                Err(err) => trigger.duplicate = Err(err.kind()),
            }
        }
        trigger
    }

    /// A trigger on a descriptor the pump holds itself (the loop's descriptor set): nobody else
    /// can close it, so there is nothing to look up again after each readiness.
    pub(crate) fn owned(fd: impl AsFd) -> TriggerFd {
        TriggerFd {
            duplicate: fd
                .as_fd()
                .try_clone_to_owned()
                .map(Arc::new)
                .map_err(|err| err.kind()),
            origin: None,
        }
    }

    /// A trigger for one pump: its own duplicate, registered with async-io; `tokio`: watched
    /// with tokio's reactor instead where the pump runs on tokio.
    pub(crate) fn register(&self, tokio: bool) -> Result<Trigger, Error> {
        let duplicate = self
            .duplicate
            .as_ref()
            .map_err(|&kind| Error::Trigger(kind))?;
        let own = duplicate_past(duplicate, self.origin.as_ref())
            .map_err(|e| Error::Trigger(e.kind()))?;
        let source = {
            let _nesting = super::nesting();
            Async::new_nonblocking(own).map_err(|e| Error::Trigger(e.kind()))?
        };
        #[cfg(not(all(feature = "tokio", not(loom))))]
        let _ = tokio;
        Ok(Trigger {
            source,
            origin: self.origin.clone(),
            #[cfg(all(feature = "tokio", not(loom)))]
            tokio,
        })
    }
}

/// Another duplicate of `fd`, at a number past the library's: made once the library may have
/// closed its descriptor, a duplicate under its number would name the very file the check
/// looks for there, and pass it.
fn duplicate_past(fd: &OwnedFd, origin: Option<&Origin>) -> io::Result<OwnedFd> {
    // Past the standard streams, as std's `try_clone`.
    let past = origin.map_or(3, |origin| origin.fd.saturating_add(1).max(3));
    match rustix::io::fcntl_dupfd_cloexec(fd, past) {
        Ok(duplicate) => Ok(duplicate),
        // Past the limit of descriptors, or every number past the library's taken: any number
        // but the library's, which is free only if the library closed its descriptor.
        Err(_) => {
            let duplicate = fd.try_clone()?;
            match origin {
                Some(origin) if duplicate.as_raw_fd() == origin.fd => {
                    Err(io::ErrorKind::NotFound.into())
                }
                _ => Ok(duplicate),
            }
        }
    }
}

/// A pump's readiness trigger.
#[derive(Debug)]
pub(crate) struct Trigger {
    pub(super) source: Async<OwnedFd>,
    origin: Option<Origin>,
    /// [`Builder::tokio_readiness`](crate::Builder::tokio_readiness).
    #[cfg(all(feature = "tokio", not(loom)))]
    tokio: bool,
}

impl Trigger {
    /// How the driver polled on this thread waits for readiness: through the reactor of the
    /// tokio runtime it runs on, if asked for and there is one, else through async-io's.
    ///
    /// # Errors
    ///
    /// `Unsupported` if tokio's reactor was asked for and the tokio runtime polling the driver
    /// has no I/O driver.
    pub(crate) fn watch(&self) -> Result<Watch<'_>, io::ErrorKind> {
        Ok(Watch {
            trigger: self,
            #[cfg(all(feature = "tokio", not(loom)))]
            tokio: match self.tokio {
                true => super::tokio::TokioReadiness::register(self)?,
                false => None,
            },
        })
    }

    /// Another duplicate of the descriptor watched, for another reactor.
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(super) fn duplicate(&self) -> io::Result<OwnedFd> {
        duplicate_past(self.source.get_ref(), self.origin.as_ref())
    }

    /// Waits until async-io's reactor reports the descriptor readable.
    async fn readable(&self) -> Result<(), io::ErrorKind> {
        self.source.readable().await.map_err(|e| e.kind())
    }

    /// Whether the descriptor is readable right now, asked of the kernel (`poll` with a zero
    /// timeout). After a run, readiness that is still there (level-triggered: more work came due
    /// during the run) is seen without a round trip through async-io's reactor thread.
    pub(crate) fn is_readable_now(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(self.source.get_ref(), PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        matches!(poll(&mut fds, Some(&now)), Ok(n) if n > 0)
    }

    /// Whether the library still has its descriptor open: once it closed it, our duplicate would
    /// stay readable forever (at EOF) and turn the pump in a busy loop. Asked after the run that a
    /// readiness caused, so the look-up (an `fstat` of the number, and for what is not a socket
    /// an `epoll_ctl` on it) does not delay the run.
    pub(crate) fn is_open(&self) -> Result<(), io::ErrorKind> {
        match &self.origin {
            Some(origin) if !origin.is_open() => Err(io::ErrorKind::NotFound),
            _ => Ok(()),
        }
    }
}

/// The active driver's wait for readiness (see [`Trigger::watch`]).
#[derive(Debug)]
pub(crate) struct Watch<'a> {
    trigger: &'a Trigger,
    #[cfg(all(feature = "tokio", not(loom)))]
    tokio: Option<super::tokio::TokioReadiness>,
}

impl Watch<'_> {
    /// The trigger watched.
    pub(crate) fn trigger(&self) -> &Trigger {
        self.trigger
    }

    /// Waits until the descriptor is readable.
    pub(crate) async fn readable(&self) -> Result<(), io::ErrorKind> {
        #[cfg(all(feature = "tokio", not(loom)))]
        if let Some(tokio) = &self.tokio {
            // tokio fails a registration only when its runtime shuts down, which says nothing
            // of the descriptor: async-io's reactor still watches it.
            if tokio.readable(self.trigger).await.is_ok() {
                return Ok(());
            }
        }
        self.trigger.readable().await
    }
}
