//! GLib's main context driven by ffi-pump: timeout, idle and I/O-watch sources created from Rust,
//! awaited from async tasks.
//!
//! A private `MainContext` lives with the pump on its own thread, which acquires it for its whole
//! life (GLib grants that to one thread at a time). The pump iterates it the way GLib's own loop
//! does — prepare, query, check, dispatch — with its own wait in place of GLib's `poll()`: the
//! descriptors the query returns are watched in the pump's `Descriptors` set, and the query's
//! timeout is the loop's deadline (`Builder::build_with_state`, `Setup::descriptors`). Nothing
//! ticks: the context is iterated when a source's descriptor is ready, when a timeout falls due,
//! when a source is made here, and when another thread attaches one to [`Sources::context`]
//! (GLib then signals the context's own wake-up descriptor, which is in the set).
//!
//! Each source is one `LoopHandle::request`: made and attached on that thread, its callback
//! completes the request; a request that gives up destroys its source there. No table or id of
//! the binding's own.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![deny(unsafe_code)]

mod polled;

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump::{Completer, Error, LoopHandle, Pump, Request};
use glib::{ControlFlow, IOCondition, MainContext, Priority};

use polled::PolledContext;

/// Counters proving how the context was driven.
#[derive(Debug, Default)]
pub struct Counters {
    /// Iterations (runs: check and dispatch of the last, prepare and query of the next).
    pub iterations: AtomicU64,
    /// Iterations that dispatched sources.
    pub dispatches: AtomicU64,
    /// Callbacks of this binding's sources that GLib dispatched (each fires once).
    pub fires: AtomicU64,
}

/// A source that fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fired {
    /// When its callback ran.
    pub at: Instant,
    /// What an I/O watch was dispatched for, as GLib's poll would have said it (`G_IO_IN`, and
    /// `G_IO_HUP` only for a connection closed both ways); empty for a timeout.
    pub condition: IOCondition,
}

/// Sources on a private GLib main context, and the pump that iterates it.
///
/// Dropping it closes the pump and returns once the loop's thread let go of the context (see
/// its `Drop`): requests still pending end with [`Error::Closed`].
#[derive(Debug)]
pub struct Sources {
    pump: Pump,
    /// The context, acquired by the loop's thread.
    polled: LoopHandle<PolledContext>,
    context: MainContext,
    counters: Arc<Counters>,
}

impl Sources {
    /// A private context, iterated by a pump on its own thread.
    ///
    /// # Errors
    ///
    /// [`Error::Factory`] if the loop's thread cannot acquire the context or make its descriptor
    /// set; the pump's errors otherwise.
    pub fn new() -> Result<Sources, Error> {
        let context = MainContext::new();
        let counters = Arc::new(Counters::default());
        let (iterated, proof) = (context.clone(), counters.clone());
        let (pump, polled) = Pump::builder()
            .name("glib")
            // The context's own descriptors (its wake-up, I/O watches) are serviced whether or
            // not a task waits; with nothing due the pump sleeps.
            .idle_stop(false)
            .build_with_state(
                move |setup| {
                    PolledContext::acquire(iterated, setup.descriptors()?)
                        .ok_or_else(|| "another thread owns the GLib context".into())
                },
                move |polled: &mut PolledContext, run| {
                    proof.iterations.fetch_add(1, Ordering::SeqCst);
                    let (dispatched, deadline) = polled.run(run);
                    if dispatched {
                        proof.dispatches.fetch_add(1, Ordering::SeqCst);
                    }
                    deadline
                },
            )?;
        Ok(Sources {
            pump,
            polled,
            context,
            counters,
        })
    }

    /// A source that fires once, after `delay` (an idle source for a zero delay; in whole
    /// milliseconds, rounded up, up to `u32::MAX` of them, ~49.7 days; past that in whole
    /// seconds, at most `u32::MAX` of them, ~136 years); the request ends when it fired. Made on
    /// the loop's thread before its next run; a request that gives up (times out, is dropped)
    /// destroys it there.
    pub fn after(&self, delay: Duration) -> Request<Fired> {
        self.attach(move |mut fire| {
            let callback = move || {
                fire(IOCondition::empty());
                ControlFlow::Break
            };
            if delay.is_zero() {
                return glib::idle_source_new(None, Priority::DEFAULT, callback);
            }
            // GLib counts whole milliseconds in 32 bits: rounded down, or wrapped past that, a
            // source would fire early. Past that, whole seconds in 32 bits, the delay's rounded
            // up and one more: GLib moves a seconds source's expiry to its own mark in the
            // second, up to a quarter of a second earlier.
            let ms = delay.as_nanos().div_ceil(1_000_000);
            match u32::try_from(ms) {
                Ok(ms) => glib::timeout_source_new(
                    Duration::from_millis(ms.into()),
                    None,
                    Priority::DEFAULT,
                    callback,
                ),
                Err(_) => {
                    let seconds = delay.as_secs().saturating_add(2);
                    let seconds = u32::try_from(seconds).unwrap_or(u32::MAX);
                    glib::timeout_source_new_seconds(seconds, None, Priority::DEFAULT, callback)
                }
            }
        })
    }

    /// A source that fires once, when `fd` becomes readable (a GLib unix-fd source); the request
    /// ends when it fired, as [`after`](Sources::after)'s does. What GLib's own loop would tell
    /// it, it is told: a descriptor the pump's set does not take — one the kernel cannot wait
    /// for (a regular file, `/dev/null`), or a closed number — is polled with GLib's `g_poll`
    /// at every iteration instead, so the first fires at once with `G_IO_IN`, the second with
    /// `G_IO_NVAL`.
    pub fn readable(&self, fd: RawFd) -> Request<Fired> {
        self.attach(move |mut fire| {
            let callback = move |_, why: IOCondition| {
                fire(why);
                ControlFlow::Break
            };
            glib_unix::fd_source_new(fd, IOCondition::IN, None, Priority::DEFAULT, callback)
        })
    }

    /// Makes the source `make` makes, with a callback that completes the request, and attaches
    /// it to the context on the loop's thread.
    fn attach<M>(&self, make: M) -> Request<Fired>
    where
        M: FnOnce(Box<dyn FnMut(IOCondition) + Send>) -> glib::Source + Send + 'static,
    {
        let fires = self.counters.clone();
        let start = move |polled: &mut PolledContext, done: Completer<Fired>| {
            let mut done = Some(done);
            let source = make(Box::new(move |condition| {
                fires.fires.fetch_add(1, Ordering::SeqCst);
                if let Some(done) = done.take() {
                    let at = Instant::now();
                    done.complete(Fired { at, condition });
                }
            }));
            source.attach(Some(polled.context()));
            source
        };
        self.polled.request(start, |_, source| source.destroy())
    }

    /// The context: sources attached to it from any thread are dispatched by the pump (GLib
    /// signals its wake-up descriptor, which the pump watches), until it closes.
    pub fn context(&self) -> &MainContext {
        &self.context
    }

    /// How the context was driven.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Whether the loop's thread owns the context (`g_main_context_is_owner`, asked there).
    pub async fn owns_context(&self) -> Result<bool, Error> {
        self.polled.call(|polled| polled.context().is_owner()).await
    }

    /// The pump.
    pub fn pump(&self) -> &Pump {
        &self.pump
    }
}

impl Drop for Sources {
    /// Closes the pump and waits until its thread let go of the context, so that this handle's
    /// reference is the last and the context ends here — unless dropped inside the pump (on its
    /// thread), where that would wait for itself. A `GSource` holds no reference to its context,
    /// and `g_source_unref` locks the context it points to: with the thread's reference the last,
    /// a source of the caller's (attached to [`Sources::context`]) dropped after this returned
    /// could lock the context as that thread freed it (heap corruption, found in review).
    fn drop(&mut self) {
        self.pump.close();
        // `Err(Reentrant)` inside the pump: nothing to wait for there.
        let _ = futures_lite::future::block_on(self.pump.closed());
    }
}
