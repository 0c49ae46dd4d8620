//! GLib's main context driven by ffi-pump: timeout and idle sources created from Rust, awaited
//! from async tasks.
//!
//! A private `MainContext` lives with the pump on its own thread; `run_once` is one
//! `iteration(false)`, taken under the context's `acquire()` guard, which GLib grants to one
//! thread at a time: an acquire that fails would mean another thread is iterating the context.
//! Each source's callback completes its key in a `Completions` table, where the task waiting for
//! it picks it up.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump::{Completions, Error, Pump};
use glib::{ControlFlow, MainContext, Priority};

/// Counters proving how the context was driven.
#[derive(Debug, Default)]
pub struct Counters {
    /// `iteration(false)` calls.
    pub iterations: AtomicU64,
    /// Iterations that found another iteration in progress.
    pub overlaps: AtomicU64,
    /// Rounds whose `acquire()` failed (the context owned by another thread).
    pub acquire_failures: AtomicU64,
}

/// Sources on a private GLib main context, and the pump that iterates it.
#[derive(Debug)]
pub struct Sources {
    pump: Pump,
    context: MainContext,
    fired: Completions<u32, Instant>,
    fires: Arc<Vec<AtomicU32>>,
    counters: Arc<Counters>,
}

impl Sources {
    /// A context for sources with ids `0..capacity`, iterated by a pump on its own thread.
    pub fn new(capacity: u32) -> Result<Sources, Error> {
        let context = MainContext::new();
        let counters = Arc::new(Counters::default());
        let (iterated, proof) = (context.clone(), counters.clone());
        let pump = Pump::builder()
            .interval(Duration::from_millis(1))
            .build_on_thread(move || {
                let inside = AtomicBool::new(false);
                move || {
                    let Ok(_owner) = iterated.acquire() else {
                        proof.acquire_failures.fetch_add(1, Ordering::SeqCst);
                        return;
                    };
                    if inside.swap(true, Ordering::SeqCst) {
                        proof.overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    iterated.iteration(false);
                    inside.store(false, Ordering::SeqCst);
                    proof.iterations.fetch_add(1, Ordering::SeqCst);
                }
            })?;
        Ok(Sources {
            pump,
            context,
            fired: Completions::new(),
            fires: Arc::new((0..capacity).map(|_| AtomicU32::new(0)).collect()),
            counters,
        })
    }

    /// Attaches a source that fires once, after `delay` (an idle source for a zero delay).
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
            glib::timeout_source_new(delay, None, Priority::DEFAULT, callback)
        };
        source.attach(Some(&self.context));
        self.pump.kick();
    }

    /// Waits until source `id` fired; when it did.
    pub async fn fired(&self, id: u32, timeout: Duration) -> Result<Instant, Error> {
        self.pump.wait_key(&self.fired, id).timeout(timeout).await
    }

    /// How often source `id` fired.
    pub fn fires(&self, id: u32) -> u32 {
        self.fires[id as usize].load(Ordering::SeqCst)
    }

    /// How the context was driven.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The pump.
    pub fn pump(&self) -> &Pump {
        &self.pump
    }
}
