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

/// The source attached under an id, and how many were: a fire counts only for the source the
/// id has now (one replaced or given up may be in its dispatch as that happens).
#[derive(Debug, Default)]
struct Slot {
    attached: u64,
    source: Option<glib::Source>,
}

type Slots = Arc<Mutex<Vec<Slot>>>;

fn lock(slots: &Slots) -> std::sync::MutexGuard<'_, Vec<Slot>> {
    slots.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a source's callback does when it fires: completes its id, if the id is still its own.
struct Fire {
    id: u32,
    attached: u64,
    slots: Slots,
    fired: Completions<u32, Instant>,
    fires: Arc<Vec<AtomicU32>>,
    conditions: Arc<Vec<AtomicU32>>,
}

impl Fire {
    fn fire(&self, condition: Option<IOCondition>) {
        let id = self.id as usize;
        // Held while it completes: a source attached in its place meanwhile waits for this.
        let slots = lock(&self.slots);
        if slots[id].attached != self.attached {
            return;
        }
        if let Some(condition) = condition {
            self.conditions[id].store(condition.bits(), Ordering::SeqCst);
        }
        self.fires[id].fetch_add(1, Ordering::SeqCst);
        self.fired.complete(self.id, Instant::now());
    }
}

/// Sources on a private GLib main context, and the pump that iterates it.
#[derive(Debug)]
pub struct Sources {
    pump: Pump,
    /// The context, acquired by the loop's thread.
    polled: LoopHandle<PolledContext>,
    context: MainContext,
    fired: Completions<u32, Instant>,
    slots: Slots,
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
            slots: Arc::new(Mutex::new((0..capacity).map(|_| Slot::default()).collect())),
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
        self.attach(id, |fire| {
            let callback = move || {
                fire.fire(None);
                ControlFlow::Break
            };
            if delay.is_zero() {
                return glib::idle_source_new(None, Priority::DEFAULT, callback);
            }
            // GLib counts whole milliseconds in 32 bits: rounded down, or wrapped past that, a
            // source would fire early.
            let ms = delay.as_micros().div_ceil(1000).min(u32::MAX.into()) as u64;
            glib::timeout_source_new(Duration::from_millis(ms), None, Priority::DEFAULT, callback)
        });
    }

    /// Attaches the source `make` makes under `id`, in place of the source the id had: from this
    /// thread, GLib wakes the pump thread through the context's wake-up descriptor, which is in
    /// the set.
    fn attach(&self, id: u32, make: impl FnOnce(Fire) -> glib::Source) {
        let mut slots = lock(&self.slots);
        let slot =
            (slots.get_mut(id as usize)).unwrap_or_else(|| panic!("source id {id} out of range"));
        slot.attached += 1;
        let source = make(Fire {
            id,
            attached: slot.attached,
            slots: self.slots.clone(),
            fired: self.fired.clone(),
            fires: self.fires.clone(),
            conditions: self.conditions.clone(),
        });
        if let Some(old) = slot.source.replace(source.clone()) {
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
        self.attach(id, |fire| {
            let callback = move |_, why: IOCondition| {
                fire.fire(Some(why));
                ControlFlow::Break
            };
            glib_unix::fd_source_new(fd, IOCondition::IN, None, Priority::DEFAULT, callback)
        });
    }

    /// Waits until source `id` fired; when it did. A wait that gives up (times out) removes
    /// the source from the context: a later source under the id is never answered with its fire.
    ///
    /// # Panics
    ///
    /// Panics if `id` is out of range (no source can fire under it), as [`add`](Sources::add)
    /// does.
    pub async fn fired(&self, id: u32, timeout: Duration) -> Result<Instant, Error> {
        let waited_for = lock(&self.slots).get(id as usize).map(|slot| slot.attached);
        assert!(waited_for.is_some(), "source id {id} out of range");
        let fired = self.pump.wait_key(&self.fired, id).timeout(timeout).await;
        if fired == Err(Error::TimedOut) {
            let mut slots = lock(&self.slots);
            // Only the source this wait was for: not one attached under the id since.
            if let Some(slot) = slots
                .get_mut(id as usize)
                .filter(|s| Some(s.attached) == waited_for)
            {
                // A fire of it already in dispatch is not counted either.
                slot.attached += 1;
                if let Some(source) = slot.source.take() {
                    source.destroy();
                }
                // Fired as the wait gave up: nobody takes it now.
                let _ = self.fired.take(&id);
            }
        }
        fired
    }

    /// How often source `id` fired.
    ///
    /// # Panics
    ///
    /// Panics if `id` is out of range.
    pub fn fires(&self, id: u32) -> u32 {
        self.fires[id as usize].load(Ordering::SeqCst)
    }

    /// What the I/O watch `id` was last dispatched for, as GLib's poll would have said it
    /// (`G_IO_IN`, and `G_IO_HUP` only for a connection closed both ways).
    ///
    /// # Panics
    ///
    /// Panics if `id` is out of range.
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

impl Drop for Sources {
    /// Lets go of the sources while this still holds the context: a `GSource` keeps no
    /// reference to its context, and `g_source_unref` locks the context it points to, so an
    /// unref racing the loop's thread dropping the context's last reference (as the pump
    /// closes) would lock a freed context (heap corruption and hangs, seen in CI).
    fn drop(&mut self) {
        let sources: Vec<glib::Source> = lock(&self.slots)
            .iter_mut()
            .filter_map(|slot| slot.source.take())
            .collect();
        drop(sources);
    }
}
