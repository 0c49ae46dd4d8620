//! GLib's main context driven by ffi-pump: timeout, idle and I/O-watch sources created from Rust,
//! awaited from async tasks.
//!
//! A private `MainContext` lives with the pump on its own thread, which acquires it for its whole
//! life (GLib grants that to one thread at a time). The pump iterates it the way GLib's own loop
//! does — prepare, query, check, dispatch — with its own wait in place of GLib's `poll()`: the
//! descriptors the query returns are watched in the pump's `Descriptors` set, and the query's
//! timeout is the loop's deadline (`Builder::build_with_state`, `Setup::descriptors`). Nothing ticks: the context
//! is iterated when a source's descriptor is ready, when a timeout falls due, and when another
//! thread attaches a source (GLib then signals the context's own wake-up descriptor).
//!
//! Each source's callback completes its key in a `Completions` table, where the task waiting for
//! it picks it up.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![deny(unsafe_code)]

mod polled;

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ffi_pump::{Completions, Error, LoopHandle, Pump};
use glib::{ControlFlow, IOCondition, MainContext, Priority};

use polled::PolledContext;

/// Counters proving how the context was driven.
#[derive(Debug, Default)]
pub struct Counters {
    /// Iterations (runs: check and dispatch of the last, prepare and query of the next).
    pub iterations: AtomicU64,
    /// Iterations that dispatched sources.
    pub dispatches: AtomicU64,
}

/// Sources on a private GLib main context, and the pump that iterates it.
#[derive(Debug)]
pub struct Sources {
    pump: Pump,
    /// The context, acquired by the loop's thread.
    polled: LoopHandle<PolledContext>,
    context: MainContext,
    fired: Completions<u32, Instant>,
    /// The source attached under each id, until it is replaced or given up.
    attached: Mutex<Vec<Option<glib::Source>>>,
    fires: Arc<Vec<AtomicU32>>,
    /// What each I/O watch was dispatched for (`GIOCondition` bits).
    conditions: Arc<Vec<AtomicU32>>,
    counters: Arc<Counters>,
}

impl Sources {
    /// A context for sources with ids `0..capacity`, iterated by a pump on its own thread.
    ///
    /// # Errors
    ///
    /// [`Error::Factory`] if the loop's thread cannot acquire the context or make its descriptor
    /// set; the pump's errors otherwise.
    pub fn new(capacity: u32) -> Result<Sources, Error> {
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
            fired: Completions::new(),
            attached: Mutex::new((0..capacity).map(|_| None).collect()),
            fires: Arc::new((0..capacity).map(|_| AtomicU32::new(0)).collect()),
            conditions: Arc::new((0..capacity).map(|_| AtomicU32::new(0)).collect()),
            counters,
        })
    }

    /// Attaches a source that fires once, after `delay` (an idle source for a zero delay; in
    /// whole milliseconds, rounded up, at most `u32::MAX` of them: ~49.7 days). It replaces the
    /// source `id` had, if that one has not fired yet.
    ///
    /// # Panics
    ///
    /// Panics if `id` is out of range.
    pub fn add(&self, id: u32, delay: Duration) {
        let (fires, fired) = (self.fires.clone(), self.fired.clone());
        assert!((id as usize) < fires.len(), "source id {id} out of range");
        let callback = move || {
            fires[id as usize].fetch_add(1, Ordering::SeqCst);
            fired.complete(id, Instant::now());
            ControlFlow::Break
        };
        let source = if delay.is_zero() {
            glib::idle_source_new(None, Priority::DEFAULT, callback)
        } else {
            // GLib counts whole milliseconds in 32 bits: rounded down, or wrapped past that, a
            // source would fire early.
            let ms = delay.as_micros().div_ceil(1000).min(u32::MAX.into()) as u64;
            glib::timeout_source_new(Duration::from_millis(ms), None, Priority::DEFAULT, callback)
        };
        self.attach(id, source);
    }

    /// Attaches `source` under `id`, in place of the source the id had: from this thread, GLib
    /// wakes the pump thread through the context's wake-up descriptor, which is in the set.
    fn attach(&self, id: u32, source: glib::Source) {
        let mut attached = self.attached.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = attached[id as usize].replace(source.clone()) {
            old.destroy();
        }
        // What the id's last source fired with, which no wait took, is not this one's.
        let _ = self.fired.take(&id);
        source.attach(Some(&self.context));
    }

    /// Attaches a source that fires once, when `fd` becomes readable (a GLib unix-fd source).
    /// The descriptor must stay open until the source fired or the pump closed. One the kernel
    /// cannot poll (a regular file, `/dev/null`), which GLib's own `poll()` finds ready at once,
    /// never fires here: the pump's set does not take it.
    ///
    /// # Panics
    ///
    /// Panics if `id` is out of range.
    pub fn watch_readable(&self, id: u32, fd: RawFd) {
        let (fires, fired) = (self.fires.clone(), self.fired.clone());
        let conditions = self.conditions.clone();
        assert!((id as usize) < fires.len(), "source id {id} out of range");
        let source = glib_unix::fd_source_new(
            fd,
            IOCondition::IN,
            None,
            Priority::DEFAULT,
            move |_, why| {
                conditions[id as usize].store(why.bits(), Ordering::SeqCst);
                fires[id as usize].fetch_add(1, Ordering::SeqCst);
                fired.complete(id, Instant::now());
                ControlFlow::Break
            },
        );
        self.attach(id, source);
    }

    /// Waits until source `id` fired; when it did. A wait that gives up (times out) removes
    /// the source from the context: a later source under the id is never answered with its fire.
    pub async fn fired(&self, id: u32, timeout: Duration) -> Result<Instant, Error> {
        let fired = self.pump.wait_key(&self.fired, id).timeout(timeout).await;
        if fired.is_err() {
            let mut attached = self.attached.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(source) = attached.get_mut(id as usize).and_then(Option::take) {
                source.destroy();
            }
            // Fired as the wait gave up: nobody takes it now.
            let _ = self.fired.take(&id);
        }
        fired
    }

    /// How often source `id` fired.
    pub fn fires(&self, id: u32) -> u32 {
        self.fires[id as usize].load(Ordering::SeqCst)
    }

    /// What the I/O watch `id` was last dispatched for, as GLib's poll would have said it
    /// (`G_IO_IN`, and `G_IO_HUP` only for a connection closed both ways).
    pub fn condition(&self, id: u32) -> IOCondition {
        IOCondition::from_bits_truncate(self.conditions[id as usize].load(Ordering::SeqCst))
    }

    /// How the context was driven.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Whether the loop's thread owns the context (`g_main_context_is_owner`, asked there).
    pub async fn owns_context(&self) -> Result<bool, Error> {
        self.polled.call(|polled| polled.is_owner()).await
    }

    /// The pump.
    pub fn pump(&self) -> &Pump {
        &self.pump
    }
}
