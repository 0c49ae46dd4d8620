//! The descriptor set's kernel side on Windows: sockets on an I/O completion port, through smol-rs
//! `polling` (its AFD backend) in level mode.
//!
//! A port cannot be watched by another reactor, so nothing outside the set waits for it: the
//! loop's own thread sleeps on the port ([`Port::sleep_unless`]), and whatever else must wake that
//! thread (a kick, a timer of async-io's) does so through the port ([`Port::notify`]).

use std::io;
use std::num::NonZeroUsize;
use std::os::windows::io::{BorrowedSocket, RawSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use polling::{Event, Events, PollMode, Poller};

use super::ready::{Found, Interest};

/// The set's side of the port: it owns it.
pub(super) struct Outer(Arc<Port>);

/// The port the registrations are in.
pub(super) struct Instance(Arc<Port>);

/// The completion port, and what the loop's thread found ready while it slept on it.
pub(crate) struct Port {
    poller: Poller,
    /// The buffer of the one thread that waits on the port at a time.
    events: Mutex<Events>,
    found: Mutex<Found_>,
    /// Signalled when a run took the reports, and at a stop (see [`Port::sleep_while`]).
    taken: Condvar,
    /// Whether a thread has the turn to sleep on the port (see [`Port::sleep_unless`]).
    sleeping: Mutex<bool>,
    /// Signalled when the turn is handed on, and at each [`notify`](Port::notify).
    turn: Condvar,
}

/// The turn to sleep on the port, handed on when dropped.
struct Turn<'a>(&'a Port);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *lock(&self.0.sleeping) = false;
        self.0.turn.notify_all();
    }
}

/// Reports fetched by [`Port::sleep_unless`] that no run took yet, and who waits for them: the
/// driver of every pump the set was given to (several pumps may share one set, and each runs for
/// what is ready, as each does on an epoll set).
#[derive(Default)]
struct Found_ {
    reports: Vec<(u64, Found)>,
    /// By trigger ([`poll_found`](Port::poll_found)'s `trigger`), one each.
    wakers: Vec<(u64, Waker)>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Outer {
    /// A new port, held by both halves.
    pub(super) fn new() -> io::Result<(Outer, Instance)> {
        let port = Arc::new(Port {
            poller: Poller::new()?,
            events: Mutex::new(Events::with_capacity(
                NonZeroUsize::new(1024).expect("not zero"),
            )),
            found: Mutex::default(),
            taken: Condvar::new(),
            sleeping: Mutex::new(false),
            turn: Condvar::new(),
        });
        Ok((Outer(port.clone()), Instance(port)))
    }

    /// The port, for the loop's thread to sleep on.
    pub(super) fn port(&self) -> &Arc<Port> {
        &self.0
    }
}

fn report(event: &Event) -> Found {
    // `is_interrupt` is AFD's abort: the connection was reset. That is a hang-up and, as epoll
    // says it (`EPOLLERR` with `EPOLLHUP`) and `Ready::is_error` promises, an error pending, which
    // the library's next read or write returns; `is_err` alone is only a failed connect.
    let reset = event.is_interrupt();
    Found {
        readable: event.readable,
        writable: event.writable,
        error: event.is_err().unwrap_or(false) || reset,
        hangup: reset,
        read_hangup: false,
    }
}

impl Instance {
    /// Adds or modifies the entry for `socket` (level-triggered).
    #[allow(unsafe_code)]
    pub(super) fn control(
        &self,
        add: bool,
        socket: RawSocket,
        key: u64,
        asked: Interest,
    ) -> io::Result<()> {
        let key = usize::try_from(key).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
        let event = Event::new(key, asked.is_readable(), asked.is_writable());
        let poller = &self.0.poller;
        match add {
            // SAFETY: the library deletes the socket from the set before it closes it
            // (`Descriptors`, "The library's part"); a socket closed while registered cancels
            // the port's pending poll of it, so a broken promise leaves nothing behind.
            true => unsafe { poller.add_with_mode(socket, event, PollMode::Level) },
            false => {
                // SAFETY: as above: the socket is open while registered; the borrow lasts for one
                // call that names it and is never read or written through.
                let borrowed = unsafe { BorrowedSocket::borrow_raw(socket) };
                poller.modify_with_mode(borrowed, event, PollMode::Level)
            }
        }
    }

    /// Takes `socket` out and adds it again: a new entry, polling the socket the number names
    /// now. `polling` keeps one entry per number, made for the socket it was added as; a socket
    /// closed under it leaves that entry (its poll failed on the closed handle, or never ends),
    /// and a change of it never reaches a new socket under the number.
    pub(super) fn renew(&self, socket: RawSocket, key: u64, asked: Interest) -> io::Result<()> {
        self.delete(socket);
        self.control(true, socket, key, asked)
    }

    /// Takes `socket` out; never leaves anything behind (a socket's registration goes with its
    /// handle), so `false`. A handle that is no longer open is not an error: the registration is
    /// gone either way.
    #[allow(unsafe_code)]
    pub(super) fn delete(&self, socket: RawSocket) -> bool {
        // SAFETY: as in `control`.
        let borrowed = unsafe { BorrowedSocket::borrow_raw(socket) };
        let _ = self.0.poller.delete(borrowed);
        false
    }

    /// Hands `found` what the loop's thread found ready while it slept, and what the port has
    /// ready now, by key (one report per key); does not wait. While another thread sleeps on the
    /// port, only the first.
    pub(super) fn wait(&self, _capacity: usize, mut found: impl FnMut(u64, Found)) {
        let port = &self.0;
        let mut reports = std::mem::take(&mut lock(&port.found).reports);
        if !reports.is_empty() {
            port.taken.notify_all();
        }
        if let Ok(mut events) = port.events.try_lock() {
            events.clear();
            // Failing here only means nothing more is handed this run; what is ready stays so.
            let _ = port.poller.wait(&mut events, Some(Duration::ZERO));
            reports.extend(
                events
                    .iter()
                    .map(|event| (event.key as u64, report(&event))),
            );
        }
        reports.sort_unstable_by_key(|&(key, _)| key);
        let mut reports = reports.into_iter().peekable();
        while let Some((key, mut merged)) = reports.next() {
            while let Some((_, more)) = reports.next_if(|&(next, _)| next == key) {
                merged.readable |= more.readable;
                merged.writable |= more.writable;
                merged.error |= more.error;
                merged.hangup |= more.hangup;
                merged.read_hangup |= more.read_hangup;
            }
            found(key, merged);
        }
    }
}

impl Drop for Port {
    /// Takes what the port still holds. `polling` gives back a socket's poll — its memory, and
    /// the AFD handle that keeps the port alive — only when a wait takes the poll's completion,
    /// and an unwatch only cancels it: with nothing to take that completion, each dropped set
    /// kept one handle per socket it had watched (a probe: 200 sets, 200 handles left). A cancel
    /// completes at once; a few looks take what is left.
    fn drop(&mut self) {
        let events = self
            .events
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for _ in 0..3 {
            events.clear();
            if self.poller.wait(events, Some(Duration::ZERO)).is_err() {
                break;
            }
        }
    }
}

impl Port {
    /// Sleeps until a registration is ready or [`notify`](Port::notify) is called, and keeps
    /// what it found for the next run; not at all once `awake` is set (by whoever notifies).
    ///
    /// Several threads may wait on one port (the threads of pumps given one set; a `ready` on
    /// another thread looks at it too), and a notification of the port goes to whichever takes it:
    /// `awake` tells each its own. One thread has the turn to sleep on the port; the others wait
    /// for it where a notification reaches them too, and look at their flag. The one with the turn
    /// looks at its flag once it holds the buffer, which anybody taking the port's notifications
    /// holds: one posted after that look is left for its wait.
    pub(crate) fn sleep_unless(&self, awake: &AtomicBool) {
        {
            let mut sleeping = lock(&self.sleeping);
            loop {
                if awake.load(Ordering::SeqCst) {
                    return;
                }
                if !*sleeping {
                    break;
                }
                sleeping = self
                    .turn
                    .wait(sleeping)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            *sleeping = true;
        }
        let _turn = Turn(self);
        let mut events = lock(&self.events);
        if awake.load(Ordering::SeqCst) {
            return;
        }
        events.clear();
        // An error (none is expected of a live port) ends the sleep as a notification would:
        // the caller looks at its work and sleeps again.
        let _ = self.poller.wait(&mut events, None);
        if events.is_empty() {
            return;
        }
        let wakers = {
            let mut found = lock(&self.found);
            let reports = events
                .iter()
                .map(|event| (event.key as u64, report(&event)));
            found.reports.extend(reports);
            std::mem::take(&mut found.wakers)
        };
        for (_, waker) in wakers {
            waker.wake();
        }
    }

    /// Ends the current or the next [`sleep_unless`](Port::sleep_unless) of the thread whose
    /// flag was set before: on the port, or waiting for its turn.
    pub(crate) fn notify(&self) {
        // Fails only when the port is gone, and then nobody sleeps on it.
        let _ = self.poller.notify();
        let _sleeping = lock(&self.sleeping);
        self.turn.notify_all();
    }

    /// Ready once a sleep found reports that no run took yet; else the waker of `trigger`'s
    /// driver is kept (in place of the one it kept before) until the next find.
    pub(crate) fn poll_found(&self, trigger: u64, cx: &mut Context<'_>) -> Poll<()> {
        let mut found = lock(&self.found);
        if !found.reports.is_empty() {
            return Poll::Ready(());
        }
        match found.wakers.iter_mut().find(|(id, _)| *id == trigger) {
            Some((_, waker)) if waker.will_wake(cx.waker()) => {}
            Some((_, waker)) => *waker = cx.waker().clone(),
            None => found.wakers.push((trigger, cx.waker().clone())),
        }
        Poll::Pending
    }

    /// `trigger` is gone: its driver's waker, if kept, goes (so a set outliving many pumps
    /// keeps no waker of theirs).
    pub(crate) fn forget_waker(&self, trigger: u64) {
        // Dropped with the lock let go: a waker's drop is the executor's code.
        let forgotten = {
            let mut found = lock(&self.found);
            let at = found.wakers.iter().position(|(id, _)| *id == trigger);
            at.map(|at| found.wakers.swap_remove(at))
        };
        drop(forgotten);
    }

    /// What the thread of [`run_on_readable`](crate::Builder::run_on_readable) does until
    /// `stop`: sleeps on the port, and once it found reports, waits until a run took them
    /// before it sleeps again (level-triggered: what is still ready is found again then).
    pub(crate) fn sleep_while(&self, stop: &AtomicBool) {
        loop {
            {
                let mut found = lock(&self.found);
                while !found.reports.is_empty() && !stop.load(Ordering::SeqCst) {
                    found = self
                        .taken
                        .wait(found)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
            if stop.load(Ordering::SeqCst) {
                return;
            }
            self.sleep_unless(stop);
        }
    }

    /// Ends [`sleep_while`](Port::sleep_while) once `stop` is set.
    pub(crate) fn wake_to_stop(&self) {
        self.notify();
        let _found = lock(&self.found);
        self.taken.notify_all();
    }

    /// Whether a sleep found reports that no run took yet.
    pub(crate) fn has_found(&self) -> bool {
        !lock(&self.found).reports.is_empty()
    }
}
