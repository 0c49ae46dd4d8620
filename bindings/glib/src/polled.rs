//! A GLib main context iterated in the four steps GLib's own loop takes — prepare, query, check,
//! dispatch — with the pump's wait where GLib would `poll()`: the context's descriptors are
//! watched in the pump's [`Descriptors`] set, and its timeout is the loop's deadline.
#![allow(unsafe_code)]

use std::collections::HashSet;
use std::os::fd::RawFd;
use std::os::raw::c_int;
use std::time::{Duration, Instant};

use ffi_pump::{Descriptors, Interest, Run};
use glib::ffi::{self, GPollFD};
use glib::MainContext;

const ALWAYS_REPORTED: u16 = (ffi::G_IO_ERR | ffi::G_IO_HUP | ffi::G_IO_NVAL) as u16;

/// The context, owned by the pump thread for its whole life, between two steps of an iteration.
pub(crate) struct PolledContext {
    context: MainContext,
    descriptors: Descriptors,
    /// The descriptors GLib asked to poll at the last query, with the events it wants.
    fds: Vec<GPollFD>,
    /// The priority the last prepare found, while its iteration waits for its check.
    prepared: Option<c_int>,
    /// The records (by index) the set does not wait for — its descriptor refused (a regular
    /// file, a closed number), or listed for no events — polled with GLib's own `g_poll`
    /// instead, as GLib's loop would poll them.
    refused: Vec<usize>,
}

impl PolledContext {
    /// Takes ownership of `context` for this thread (`g_main_context_acquire`); `None` if another
    /// thread owns it.
    pub(crate) fn acquire(context: MainContext, descriptors: Descriptors) -> Option<PolledContext> {
        // SAFETY: `as_ptr` is the live context `context` holds a reference to; acquiring it is
        // released in `Drop` on this same thread (the pump thread makes and drops the state).
        let acquired = unsafe { ffi::g_main_context_acquire(context.as_ptr()) } != 0;
        acquired.then(|| PolledContext {
            context,
            descriptors,
            fds: Vec::new(),
            prepared: None,
            refused: Vec::new(),
        })
    }

    /// Ends the iteration the last run prepared (check with what the set found ready, dispatch
    /// what is due), then prepares the next: its descriptors go into the set, its timeout is the
    /// returned deadline. Returns whether anything was dispatched, and that deadline.
    pub(crate) fn run(&mut self, run: &Run<'_>) -> (bool, Option<Instant>) {
        let context = self.context.as_ptr();
        let mut dispatched = false;
        if let Some(max_priority) = self.prepared.take() {
            self.fill_revents(run);
            let n = c_int::try_from(self.fds.len()).unwrap_or(c_int::MAX);
            // SAFETY: the context is acquired by this thread and was prepared and queried by the
            // last run; `fds` holds `n` records, filled by that query.
            let ready = unsafe {
                ffi::g_main_context_check(context, max_priority, self.fds.as_mut_ptr(), n)
            };
            if ready != 0 {
                // SAFETY: as above, right after a check that found sources ready.
                unsafe { ffi::g_main_context_dispatch(context) };
                dispatched = true;
            }
        }
        let mut max_priority: c_int = 0;
        // SAFETY: the context is acquired by this thread; no iteration is in progress (the last
        // one was checked above).
        unsafe { ffi::g_main_context_prepare(context, &mut max_priority) };
        let mut timeout: c_int = -1;
        loop {
            let capacity = self.fds.capacity().max(8);
            self.fds.resize(
                capacity,
                GPollFD {
                    fd: -1,
                    events: 0,
                    revents: 0,
                },
            );
            let room = c_int::try_from(capacity).unwrap_or(c_int::MAX);
            // SAFETY: right after prepare on this thread; `fds` has room for `room` records.
            let wanted = unsafe {
                ffi::g_main_context_query(
                    context,
                    max_priority,
                    &mut timeout,
                    self.fds.as_mut_ptr(),
                    room,
                )
            };
            let wanted = usize::try_from(wanted).unwrap_or(0);
            if wanted <= capacity {
                self.fds.truncate(wanted);
                break;
            }
            // More descriptors than room: ask again with enough (GLib allows a repeated query).
            self.fds.reserve(wanted - capacity);
        }
        self.prepared = Some(max_priority);
        self.watch_what_glib_polls();
        // What the set cannot wait for and `poll()` finds ready (a regular file, `G_IO_NVAL`
        // for a closed number) is checked at once, as GLib's own loop would.
        let timeout = match self.poll_refused() {
            true => 0,
            false => timeout,
        };
        let deadline = u64::try_from(timeout)
            .ok()
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        (dispatched, deadline)
    }

    /// `revents` for each record: what poll(2) would have said, of what the record asks for and
    /// what it reports unasked.
    fn fill_revents(&mut self, run: &Run<'_>) {
        for record in &mut self.fds {
            record.revents = 0;
        }
        for ready in run.ready() {
            let revents = ready.poll_revents() as u16;
            for record in self.fds.iter_mut().filter(|r| r.fd == ready.fd()) {
                record.revents |= revents & (record.events | ALWAYS_REPORTED);
            }
        }
        self.poll_refused();
    }

    /// Polls the records the set refused, without waiting, with GLib's `g_poll`: their
    /// `revents` as GLib's loop would have them. Whether any is ready.
    fn poll_refused(&mut self) -> bool {
        if self.refused.is_empty() {
            return false;
        }
        let mut records: Vec<GPollFD> = (self.refused.iter())
            .map(|&at| GPollFD {
                revents: 0,
                ..self.fds[at]
            })
            .collect();
        let n = u32::try_from(records.len()).unwrap_or(u32::MAX);
        // SAFETY: `records` holds `n` initialised records, which `g_poll` (GLib's `poll()`)
        // only reads and writes `revents` of; a timeout of 0 returns at once.
        unsafe { ffi::g_poll(records.as_mut_ptr(), n, 0) };
        for (&at, polled) in self.refused.iter().zip(&records) {
            self.fds[at].revents = polled.revents;
        }
        records.iter().any(|record| record.revents != 0)
    }

    /// Makes the set watch exactly what the last query asked for. A descriptor the set refuses
    /// (a regular file, a closed number) stays out of it, and is polled instead; so is one
    /// listed for no events, which the set keeps out of the kernel, where `poll()` still says
    /// `G_IO_HUP`, `G_IO_ERR` or `G_IO_NVAL` (polled at each iteration: it does not wake one).
    fn watch_what_glib_polls(&mut self) {
        self.refused.clear();
        let watched = self.descriptors.watch_only(
            self.fds
                .iter()
                .map(|record| (record.fd, Interest::from_poll_events(record.events as i16))),
        );
        // Asked of the set only when it refused one: which descriptors it holds.
        let held: Option<HashSet<RawFd>> = watched.is_err().then(|| {
            (self.descriptors.watched().into_iter())
                .map(|(_, fd, _)| fd)
                .collect()
        });
        let fds = &self.fds;
        let refused = |at: &usize| {
            held.as_ref()
                .is_some_and(|held| !held.contains(&fds[*at].fd))
        };
        (self.refused).extend((0..fds.len()).filter(|at| fds[*at].events == 0 || refused(at)));
    }

    /// The context.
    pub(crate) fn context(&self) -> &MainContext {
        &self.context
    }
}

impl Drop for PolledContext {
    fn drop(&mut self) {
        // SAFETY: acquired in `acquire` on this thread (the state is dropped where it was made).
        unsafe { ffi::g_main_context_release(self.context.as_ptr()) };
    }
}
