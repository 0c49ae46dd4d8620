//! Tcl 8.6 times its timers by its own clock, the wall clock: set back (an NTP step,
//! `settimeofday`), Tcl fires a timer that much later. Tcl's clock is set back here through its
//! public hook, `Tcl_SetTimeProc`, which is process-wide: this file holds this one test.

use std::ffi::{c_long, c_void};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ffi_pump_tcl::{Schedule, Tcl};

#[repr(C)]
struct TclTime {
    sec: c_long,
    usec: c_long,
}

type TimeProc = unsafe extern "C" fn(*mut TclTime, *mut c_void);

extern "C" {
    fn Tcl_SetTimeProc(get: TimeProc, scale: TimeProc, data: *mut c_void);
}

/// How far Tcl's clock is behind the wall clock, in µs.
static BEHIND_US: AtomicI64 = AtomicI64::new(0);

/// # Safety
///
/// Called by Tcl with a `Tcl_Time` to fill.
unsafe extern "C" fn behind(time: *mut TclTime, _: *mut c_void) {
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    let now = wall.as_micros() as i64 - BEHIND_US.load(Ordering::SeqCst);
    // SAFETY: Tcl hands a valid `Tcl_Time` to fill.
    unsafe {
        *time = TclTime {
            sec: (now / 1_000_000) as c_long,
            usec: (now % 1_000_000) as c_long,
        }
    };
}

/// # Safety
///
/// Called by Tcl with a `Tcl_Time` to scale: left as it is.
unsafe extern "C" fn unscaled(_: *mut TclTime, _: *mut c_void) {}

/// Found by a hostile probe: the binding dropped its record of a timer once the monotonic clock
/// passed its due time, fired or not; with Tcl's clock set back 1 s, the pump then had no
/// deadline for the timer Tcl still held, and the sleep timed out after 5 s.
#[test]
fn a_sleep_fires_when_tcl_finds_it_due_after_its_clock_was_set_back() {
    let tcl = Arc::new(Tcl::new(Schedule::Deadlines).expect("pump thread"));
    // SAFETY: both procs have Tcl's signatures and are for the life of the process.
    unsafe { Tcl_SetTimeProc(behind, unscaled, std::ptr::null_mut()) };
    smol::block_on(async {
        let started = Instant::now();
        let sleeper = {
            let tcl = tcl.clone();
            smol::spawn(async move {
                let sleep = tcl.sleep(Duration::from_millis(100), Duration::from_secs(5));
                sleep.await
            })
        };
        while tcl.pending_timers().await != Ok(1) {
            smol::Timer::after(Duration::from_millis(1)).await;
        }
        BEHIND_US.store(1_000_000, Ordering::SeqCst);
        let fired = sleeper.await.expect("fired, a second late");
        let taken = started.elapsed();
        assert!(taken >= Duration::from_millis(1_100), "after {taken:?}");
        assert!(taken < Duration::from_secs(3), "after {taken:?}");
        assert!(fired.at >= fired.due);
        let runs = tcl.counters().runs.load(Ordering::SeqCst);
        assert!(runs < 50, "{runs} runs while Tcl's clock caught up");
        assert_eq!(tcl.pending_timers().await, Ok(0));
    });
}
