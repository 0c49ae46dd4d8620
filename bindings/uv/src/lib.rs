//! libuv driven by ffi-pump: a uv loop on the pump thread, run at its own next timeout, its
//! timers awaited from any async task.
//!
//! A uv loop is not thread-safe, so it is the pump thread's state
//! (`Builder::build_with_state`). `run_once` is `uv_run(UV_RUN_NOWAIT)` and reports the loop's
//! own next timeout (`uv_backend_timeout`), so the thread sleeps until then — no interval and no
//! bookkeeping of deadlines in the binding. [`Uv::sleep`] is one `LoopHandle::request`: it
//! starts a uv timer there, whose callback completes the request; a sleep that gives up stops
//! and closes its timer there (the request's cancel).
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

mod ffi;

use std::alloc::Layout;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use ffi_pump_binding_support::Fired;
use ffi_pump_binding_support::{Callback, Timers};

use ffi_pump::{Completer, Error, LoopHandle, Pump};

/// Counters proving how the loop was driven.
#[derive(Debug, Default)]
pub struct Counters {
    /// `uv_run` calls.
    pub runs: AtomicU64,
}

/// Memory for a libuv object of `size` bytes (a loop, a handle), as libuv reports its size.
fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 16).expect("a sane size")
}

/// Takes a timer's `Callback` off its handle (the data is null after), and closes the handle.
///
/// # Safety
///
/// `handle` is a timer made by `Loop::after` that was not closed yet, on its loop's thread.
unsafe fn close_timer(handle: *mut ffi::uv_handle_t) -> Box<Callback> {
    // SAFETY: the handle's data is the `Box<Callback>` leaked by `Loop::after`, taken once (here:
    // the data is null afterwards and the handle closed, so no second call can come).
    unsafe {
        let callback = Box::from_raw(ffi::uv_handle_get_data(handle).cast::<Callback>());
        ffi::uv_handle_set_data(handle, std::ptr::null_mut());
        ffi::uv_close(handle, closed);
        callback
    }
}

/// # Safety
///
/// Called by libuv with a timer handle made by `Loop::after`, once (it does not repeat).
unsafe extern "C" fn fire(handle: *mut ffi::uv_handle_t) {
    // SAFETY: a timer of `Loop::after` firing: not closed yet (a closed one does not fire), and
    // closing it in its own callback is allowed.
    let callback = unsafe { close_timer(handle) };
    callback.fire();
}

/// # Safety
///
/// libuv's close callback of a timer handle made by `Loop::after`.
unsafe extern "C" fn closed(handle: *mut ffi::uv_handle_t) {
    // SAFETY: the handle is closed: libuv no longer uses it; made by `Loop::after` with this
    // layout, freed here once (its data was taken when it was closed).
    unsafe { std::alloc::dealloc(handle.cast(), layout(ffi::uv_handle_size(ffi::UV_TIMER))) };
}

/// The uv loop and its timers, on the pump thread.
struct Loop {
    raw: *mut ffi::uv_loop_t,
    timers: Timers,
    counters: Arc<Counters>,
}

impl Loop {
    fn new(counters: Arc<Counters>) -> Loop {
        // SAFETY: the loop's memory has the size libuv reports; it is initialised here, used on
        // this thread only, and closed and freed in `drop`.
        let raw = unsafe {
            let raw = std::alloc::alloc(layout(ffi::uv_loop_size())).cast::<ffi::uv_loop_t>();
            assert!(!raw.is_null(), "out of memory");
            assert_eq!(ffi::uv_loop_init(raw), 0, "uv_loop_init failed");
            raw
        };
        Loop {
            raw,
            timers: Timers::default(),
            counters,
        }
    }

    /// Starts a uv timer `delay` from now that completes `done`; its handle is what a cancel
    /// needs.
    fn after(&mut self, done: Completer<Fired>, delay: Duration) -> *mut ffi::uv_handle_t {
        // libuv counts a timer from its cached clock, in whole milliseconds, rounded down: as
        // old as the last run (after an idle spell the timer would be due at once), and up to a
        // millisecond behind even when brought up to date. The timeout is counted from that
        // clock to the first whole millisecond at or past the delay, so the timer never fires
        // before it.
        // Read first: the due time it gives is no later than libuv's (as far as an `Instant`
        // goes: past that, libuv's timeout saturates too).
        let due = Instant::now() + delay.min(Duration::from_millis(u64::MAX));
        // SAFETY: this thread owns the loop; `uv_hrtime` reads the clock `Instant` reads
        // (CLOCK_MONOTONIC), in nanoseconds; `uv_update_time` reads it too, or its coarse form,
        // which lags it (by up to a kernel tick) and so only makes the timer later.
        let (loop_ms, now_ns) = unsafe {
            ffi::uv_update_time(self.raw);
            (ffi::uv_now(self.raw), ffi::uv_hrtime())
        };
        let due_ms = (u128::from(now_ns) + delay.as_nanos()).div_ceil(1_000_000);
        let ms = u64::try_from(due_ms.saturating_sub(loop_ms.into())).unwrap_or(u64::MAX);
        let data = Box::into_raw(Box::new(self.timers.callback(done, due)));
        // SAFETY: the handle's memory has the size libuv reports for a timer; it is initialised
        // on this loop, carries `data`, and is freed by `closed` once libuv is done with it.
        unsafe {
            let handle = std::alloc::alloc(layout(ffi::uv_handle_size(ffi::UV_TIMER)))
                .cast::<ffi::uv_handle_t>();
            assert!(!handle.is_null(), "out of memory");
            ffi::uv_timer_init(self.raw, handle);
            ffi::uv_handle_set_data(handle, data.cast::<c_void>());
            ffi::uv_timer_start(handle, fire, ms, 0);
            handle
        }
    }

    /// Stops a timer whose sleep gave up: the pump runs this only if it has not fired.
    fn cancel(&mut self, handle: *mut ffi::uv_handle_t) {
        // SAFETY: the timer has not fired (firing answers its sleep, and the pump does not
        // cancel an answered one), so it is live and not closed.
        unsafe {
            ffi::uv_timer_stop(handle);
            drop(close_timer(handle));
        }
    }

    /// One run: `uv_run(UV_RUN_NOWAIT)`, then when the loop next needs to run.
    fn run_once(&mut self) -> Option<Instant> {
        self.counters.runs.fetch_add(1, Ordering::SeqCst);
        // SAFETY: this thread owns the loop.
        unsafe { ffi::uv_run(self.raw, ffi::UV_RUN_NOWAIT) };
        // libuv's timeout is 0 for a loop with nothing left in it (no active handle, request or
        // closing handle), which would make the pump run it again and again while idle.
        // SAFETY: as above.
        if unsafe { ffi::uv_loop_alive(self.raw) } == 0 {
            return None;
        }
        // SAFETY: as above. -1: no timer is due; 0: run again at once (closing handles).
        let timeout = unsafe { ffi::uv_backend_timeout(self.raw) };
        let timeout = u64::try_from(timeout).ok()?;
        // Due at a whole millisecond of the loop's clock: woken when `uv_hrtime` (as `Instant`
        // reads it) gets there, not a whole timeout after now, which would add what the loop's
        // cached clock lags behind (up to a millisecond, and the run). Where libuv's clock is
        // the kernel's coarse one, which lags `uv_hrtime` by up to a tick, a timer can still
        // be ahead when `uv_hrtime` is past it: then the whole timeout, as libuv counts it, so
        // the thread does not run the loop again and again until the coarse clock ticks.
        // SAFETY: as above.
        let (loop_ms, now_ns) = unsafe { (ffi::uv_now(self.raw), ffi::uv_hrtime()) };
        let due_ns = loop_ms.saturating_add(timeout).saturating_mul(1_000_000);
        let wait = match due_ns.saturating_sub(now_ns) {
            0 if timeout > 0 => Duration::from_millis(timeout),
            ns => Duration::from_nanos(ns),
        };
        Some(Instant::now() + wait)
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        // Every timer left was stopped and closed by its sleep's cancel, which the pump runs at
        // the close, before it drops the state.
        // SAFETY: runs the close callbacks, then closes and frees the loop (nothing is left on
        // it), on the thread that owns it.
        unsafe {
            while ffi::uv_run(self.raw, ffi::UV_RUN_NOWAIT) != 0 {}
            let status = ffi::uv_loop_close(self.raw);
            debug_assert_eq!(status, 0, "the uv loop still had handles");
            std::alloc::dealloc(self.raw.cast(), layout(ffi::uv_loop_size()));
        }
    }
}

/// A uv loop on a pump thread.
#[derive(Debug)]
pub struct Uv {
    pump: Pump,
    uv: LoopHandle<Loop>,
    counters: Arc<Counters>,
}

impl Uv {
    /// Starts the pump thread and initialises the uv loop there.
    pub fn new() -> Result<Uv, Error> {
        let counters = Arc::new(Counters::default());
        let proof = counters.clone();
        let (pump, uv) = Pump::builder()
            .name("libuv")
            .build_with_state(move |_| Ok(Loop::new(proof)), |uv, _| uv.run_once())?;
        Ok(Uv { pump, uv, counters })
    }

    /// Starts a uv timer `delay` from now and waits for its callback, giving up after `timeout`
    /// (the timer is then stopped and closed in libuv). It never fires before `delay`: libuv
    /// counts whole milliseconds, so it may fire up to one after, and the wake-up's own latency
    /// on top.
    pub async fn sleep(&self, delay: Duration, timeout: Duration) -> Result<Fired, Error> {
        let fired = self
            .uv
            .request(move |uv, done| uv.after(done, delay), Loop::cancel);
        fired.timeout(timeout).await
    }

    /// Timers the binding started that have neither fired nor been stopped.
    pub async fn pending_timers(&self) -> Result<usize, Error> {
        self.uv.call(|uv| uv.timers.pending()).await
    }

    /// The pump that drives the loop.
    pub fn pump(&self) -> &Pump {
        &self.pump
    }

    /// How the loop was driven.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}
