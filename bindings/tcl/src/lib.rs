//! Tcl 8.6 driven by ffi-pump: an interpreter that lives on the pump thread, timers and scripts
//! awaited from any async task.
//!
//! A Tcl interpreter and its notifier belong to the thread that created them, so the
//! interpreter is the pump thread's state (`Builder::build_with_state`). `run_once` services
//! every ready event (`Tcl_DoOneEvent(TCL_DONT_WAIT)` until none is left, at most 100 000 a run:
//! a script that keeps posting idle events delays the binding's timers) and reports when the
//! next timer made through this binding is due, so the thread sleeps until then — no interval.
//! Due by Tcl's own clock, the wall clock: set back, Tcl fires its timers that much later, and
//! the thread wakes for them then.
//! [`Tcl::sleep`] is one `LoopHandle::request`: it creates a Tcl timer on that thread, whose
//! callback completes the request; a sleep that gives up deletes its timer there (the request's
//! cancel). No table or id of the binding's own.
//! [`Tcl::eval`] runs a script there and returns its result.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

mod ffi;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ffi::{c_int, c_void};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

pub use ffi_pump_binding_support::Fired;
use ffi_pump_binding_support::{Callback, Timers};

use ffi_pump::{Completer, Error, LoopHandle, Pump, RequestId};

/// When the binding runs the interpreter's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// At the deadline of the next timer (the default): no run while nothing is due.
    Deadlines,
    /// Every `period` while a timer is pending, as a wrapper without deadlines would: the
    /// baseline of the binding's benchmark. A zero period runs Tcl back to back meanwhile.
    Every(Duration),
}

/// Counters proving how the interpreter was driven.
#[derive(Debug, Default)]
pub struct Counters {
    /// `run_once` calls.
    pub runs: AtomicU64,
    /// `Tcl_DoOneEvent` calls of the binding's runs that serviced an event (not those a script
    /// makes, with `update` or `vwait`).
    pub events: AtomicU64,
    /// Runs that found another run in progress.
    pub overlaps: AtomicU64,
}

/// When a timer is due by Tcl's clock (µs since its epoch), and whose it is.
type Due = (i64, RequestId);

/// The interpreter and the binding's timers, on the pump thread.
struct Interp {
    raw: *mut ffi::Tcl_Interp,
    schedule: Schedule,
    /// When each pending timer is due, in order (Tcl does not say when its next one is). By
    /// Tcl's own clock, the wall clock: if that is set back, Tcl fires its timers that much
    /// later, and the pump wakes for them then. Each leaves it as it fires, or at its cancel.
    due: Rc<RefCell<BTreeSet<Due>>>,
    timers: Timers,
    counters: Arc<Counters>,
    inside: AtomicBool,
}

/// A timer made for a sleep: what its cancel needs (kept by the pump on this thread).
struct Timer {
    token: ffi::Tcl_TimerToken,
    data: *mut TimerData,
}

/// What a timer's callback carries.
struct TimerData {
    callback: Callback,
    due: Due,
    pending: Rc<RefCell<BTreeSet<Due>>>,
}

/// # Safety
///
/// Called by Tcl with the `TimerData` that `Interp::after` leaked for it, once.
unsafe extern "C" fn fire(client_data: *mut c_void) {
    // SAFETY: `client_data` is the `Box<TimerData>` leaked by `Interp::after`; Tcl calls this
    // once, and firing answers the sleep, after which its cancel (the only other owner) never
    // runs: it is freed exactly once.
    let data = unsafe { Box::from_raw(client_data.cast::<TimerData>()) };
    data.pending.borrow_mut().remove(&data.due);
    data.callback.fire();
}

/// Tcl's clock now, in µs since its epoch.
fn tcl_now() -> i64 {
    let mut time = ffi::Tcl_Time { sec: 0, usec: 0 };
    // SAFETY: writes the time into `time`; callable on any thread once Tcl is initialised.
    unsafe { ffi::Tcl_GetTime(&mut time) };
    #[allow(clippy::useless_conversion)] // `c_long` is 32 bits on Windows
    let (sec, usec) = (i64::from(time.sec), i64::from(time.usec));
    sec * 1_000_000 + usec
}

impl Interp {
    fn new(schedule: Schedule, counters: Arc<Counters>) -> Result<Interp, ffi_pump::FactoryError> {
        static INIT: Once = Once::new();
        INIT.call_once(|| {
            // SAFETY: initialises Tcl's process-wide state; a null argv0 is allowed.
            unsafe { ffi::Tcl_FindExecutable(std::ptr::null()) };
            // A notifier use never given back, so Tcl's count of them never falls to 0 when an
            // interpreter's thread finalizes: its notifier thread then starts once and stays.
            // Stopping it leaks a descriptor at random: Tcl 8.6's `Tcl_FinalizeNotifier` writes
            // "q" to that thread's trigger pipe, then reads `triggerPipe` again, unlocked, to
            // close it; the woken thread may have set it to -1 by then, and `close(-1)` leaves
            // the pipe's write end open.
            // SAFETY: Tcl is initialised (above). It sets up this thread's notifier data, which
            // this thread's `Tcl_FinalizeThread` frees, and counts one more use, on purpose.
            unsafe { ffi::Tcl_InitNotifier() };
        });
        // SAFETY: no precondition; the interpreter belongs to this (the pump) thread.
        let raw = unsafe { ffi::Tcl_CreateInterp() };
        if raw.is_null() {
            return Err("Tcl_CreateInterp returned null".into());
        }
        Ok(Interp {
            raw,
            schedule,
            due: Rc::default(),
            timers: Timers::default(),
            counters,
            inside: AtomicBool::new(false),
        })
    }

    /// Creates a Tcl timer `delay` from now that completes `done`.
    fn after(&mut self, done: Completer<Fired>, delay: Duration) -> Timer {
        let id = done.id();
        // Whole milliseconds, rounded up: a timer never fires before its delay.
        let ms = c_int::try_from(delay.as_nanos().div_ceil(1_000_000)).unwrap_or(c_int::MAX);
        let delay = Duration::from_millis(ms as u64);
        // Read before Tcl reads its own clock: the timer is due no earlier than this.
        let callback = self.timers.callback(done, Instant::now() + delay);
        let pending = self.due.clone();
        let data = Box::into_raw(Box::new(TimerData {
            callback,
            due: (i64::MIN, id),
            pending,
        }));
        // SAFETY: `fire` matches `Tcl_TimerProc`; `data` stays valid until `fire` frees it or
        // `cancel` deletes the timer and frees it.
        let token = unsafe { ffi::Tcl_CreateTimerHandler(ms, fire, data.cast()) };
        // Read after Tcl read its own clock: when this passes, Tcl's due time has passed too, so
        // a run then finds it due.
        let due = (tcl_now() + i64::from(ms) * 1000, id);
        // SAFETY: `data` is the live box made above; Tcl reads it only in `fire`, which runs in
        // `Tcl_DoOneEvent` on this thread, not before this returns.
        unsafe { (*data).due = due };
        self.due.borrow_mut().insert(due);
        Timer { token, data }
    }

    /// Deletes a timer whose sleep gave up: the pump runs this only if it has not fired.
    fn cancel(&mut self, timer: Timer) {
        // SAFETY: the timer has not fired (firing answers its sleep, and the pump does not
        // cancel an answered one), so Tcl still holds the token and `data`; once deleted, Tcl
        // never calls `fire` with it.
        unsafe {
            ffi::Tcl_DeleteTimerHandler(timer.token);
            let data = Box::from_raw(timer.data);
            self.due.borrow_mut().remove(&data.due);
        }
    }

    /// Runs `script`, handed to Tcl and back in UTF-16, which Tcl 8.6 converts to and from its
    /// own form of UTF-8 (NUL as `C0 80`, a character past U+FFFF as a surrogate pair).
    fn eval(&mut self, script: &str) -> Result<String, String> {
        let script: Vec<ffi::Tcl_UniChar> = script.encode_utf16().collect();
        let len = c_int::try_from(script.len()).map_err(|_| "script too long".to_string())?;
        let mut result_len: c_int = 0;
        // SAFETY: `raw` is this thread's live interpreter. The new object copies the `len`
        // units of `script`; `Tcl_EvalObjEx` holds a reference to it while it runs and frees it
        // after (it had none). The result object is the interpreter's, alive until its next
        // call; its units are `result_len` long (never null: Tcl ends them with a 0).
        let (code, result) = unsafe {
            let object = ffi::Tcl_NewUnicodeObj(script.as_ptr(), len);
            let code = ffi::Tcl_EvalObjEx(self.raw, object, 0);
            let result = ffi::Tcl_GetObjResult(self.raw);
            let units = ffi::Tcl_GetUnicodeFromObj(result, &mut result_len);
            let units = std::slice::from_raw_parts(units, usize::try_from(result_len).unwrap_or(0));
            (code, String::from_utf16_lossy(units))
        };
        if code == ffi::TCL_OK {
            Ok(result)
        } else {
            Err(result)
        }
    }

    /// One run: every event that is ready, then when the next run is due.
    fn run_once(&mut self) -> Option<Instant> {
        if self.inside.swap(true, Ordering::SeqCst) {
            self.counters.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        self.counters.runs.fetch_add(1, Ordering::SeqCst);
        // Bounded, in case a script keeps posting idle events.
        for _ in 0..100_000 {
            // SAFETY: this thread owns the interpreter and its notifier.
            if unsafe { ffi::Tcl_DoOneEvent(ffi::TCL_DONT_WAIT | ffi::TCL_ALL_EVENTS) } == 0 {
                break;
            }
            self.counters.events.fetch_add(1, Ordering::SeqCst);
        }
        self.inside.store(false, Ordering::SeqCst);
        let (&(next, _), schedule) = (self.due.borrow().first()?, self.schedule);
        match schedule {
            // A timer Tcl did not find due although its time has come (it came after Tcl
            // looked, or Tcl's clock was set back meanwhile) is looked at again a millisecond on.
            Schedule::Deadlines => match u64::try_from(next - tcl_now()) {
                Ok(wait) if wait > 0 => Some(Instant::now() + Duration::from_micros(wait)),
                _ => Some(Instant::now() + Duration::from_millis(1)),
            },
            // A period past the clock's range never comes.
            Schedule::Every(period) => Instant::now().checked_add(period),
        }
    }
}

impl Drop for Interp {
    fn drop(&mut self) {
        // Every timer left was deleted by its sleep's cancel, which the pump runs at the close,
        // before it drops the state.
        // SAFETY: the interpreter was created on this thread and is deleted once. The state is
        // dropped as its thread ends, which uses Tcl no more: that thread's data (its notifier,
        // its allocator's caches, ~128 KiB) goes with it, or every interpreter leaks it.
        unsafe {
            ffi::Tcl_DeleteInterp(self.raw);
            ffi::Tcl_FinalizeThread();
        }
    }
}

/// A Tcl interpreter on a pump thread.
#[derive(Debug)]
pub struct Tcl {
    pump: Pump,
    interp: LoopHandle<Interp>,
    counters: Arc<Counters>,
}

impl Tcl {
    /// Starts the pump thread and creates the interpreter there.
    pub fn new(schedule: Schedule) -> Result<Tcl, Error> {
        let counters = Arc::new(Counters::default());
        let proof = counters.clone();
        let (pump, interp) = Pump::builder().name("tcl").build_with_state(
            move |_| Interp::new(schedule, proof),
            |interp, _| interp.run_once(),
        )?;
        Ok(Tcl {
            pump,
            interp,
            counters,
        })
    }

    /// Creates a Tcl timer `delay` from now (in whole milliseconds, rounded up, at most
    /// `i32::MAX` of them: ~24.8 days) and waits for its callback, giving up after `timeout` (the
    /// timer is then deleted in Tcl).
    pub async fn sleep(&self, delay: Duration, timeout: Duration) -> Result<Fired, Error> {
        let start = move |interp: &mut Interp, done| interp.after(done, delay);
        let fired = self.interp.request(start, Interp::cancel);
        fired.timeout(timeout).await
    }

    /// Evaluates `script` in the interpreter: its result, or its error message.
    ///
    /// Tcl does not say when its own timers are due, nor which files its handlers wait on, so
    /// the pump wakes for the timers made through [`sleep`](Tcl::sleep) only: an `after` or a
    /// `fileevent` handler the script creates runs at the next run the pump makes for another
    /// reason (a sleep, an eval). `exit` ends the process, as in any Tcl.
    pub async fn eval(&self, script: &str) -> Result<Result<String, String>, Error> {
        let script = script.to_string();
        self.interp.call(move |state| state.eval(&script)).await
    }

    /// Timers the binding created that have neither fired nor been deleted.
    pub async fn pending_timers(&self) -> Result<usize, Error> {
        self.interp.call(|state| state.timers.pending()).await
    }

    /// The pump that drives the interpreter.
    pub fn pump(&self) -> &Pump {
        &self.pump
    }

    /// How the interpreter was driven.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}
