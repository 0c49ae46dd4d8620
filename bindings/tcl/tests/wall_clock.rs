//! Tcl 8.6 times its timers by its own clock, the wall clock: set back (an NTP step,
//! `settimeofday`), Tcl fires a timer that much later. Tcl's clock is set back here through its
//! public hook, `Tcl_SetTimeProc`, which is process-wide: this file holds the tests that move
//! it, one at a time.

use std::ffi::{c_long, c_void};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
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

/// The wall-clock time (µs) from which reads of Tcl's clock are counted.
static COUNT_FROM_US: AtomicI64 = AtomicI64::new(i64::MAX);
/// The counted read at which the clock is set back, and the reads counted so far.
static STEP_AT: AtomicU32 = AtomicU32::new(0);
static READS: AtomicU32 = AtomicU32::new(0);
/// When the clock was set back, if it was.
static STEPPED: Mutex<Option<Instant>> = Mutex::new(None);
/// How far Tcl's clock is behind the wall clock, in µs.
static BEHIND_US: AtomicI64 = AtomicI64::new(0);

fn wall_us() -> i64 {
    let wall = SystemTime::now().duration_since(UNIX_EPOCH);
    wall.expect("after 1970").as_micros() as i64
}

/// Tcl's clock: the wall clock, `BEHIND_US` behind, set back a second more at the `STEP_AT`th
/// read from `COUNT_FROM_US` on.
///
/// # Safety
///
/// Called by Tcl with a `Tcl_Time` to fill.
unsafe extern "C" fn clock(time: *mut TclTime, _: *mut c_void) {
    let wall = wall_us();
    if wall >= COUNT_FROM_US.load(Ordering::SeqCst)
        && READS.fetch_add(1, Ordering::SeqCst) + 1 == STEP_AT.load(Ordering::SeqCst)
    {
        BEHIND_US.fetch_add(1_000_000, Ordering::SeqCst);
        *STEPPED.lock().expect("not poisoned") = Some(Instant::now());
    }
    let now = wall - BEHIND_US.load(Ordering::SeqCst);
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

/// The tests here move the process's one clock of Tcl's: one at a time, each from a clock at
/// the wall clock's time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Takes the clock for a test: Tcl's reads go to [`clock`], at the wall clock's time.
fn take_the_clock() -> std::sync::MutexGuard<'static, ()> {
    let taken = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    BEHIND_US.store(0, Ordering::SeqCst);
    COUNT_FROM_US.store(i64::MAX, Ordering::SeqCst);
    // SAFETY: both procs have Tcl's signatures and are for the life of the process.
    unsafe { Tcl_SetTimeProc(clock, unscaled, std::ptr::null_mut()) };
    taken
}

/// Found by a hostile probe: the binding dropped its record of a timer once the monotonic clock
/// passed its due time, fired or not; with Tcl's clock set back 1 s, the pump then had no
/// deadline for the timer Tcl still held, and the sleep timed out after 5 s.
#[test]
fn a_sleep_fires_when_tcl_finds_it_due_after_its_clock_was_set_back() {
    let _clock = take_the_clock();
    let tcl = Arc::new(Tcl::new(Schedule::Deadlines).expect("pump thread"));
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

/// Found by a hostile probe: the binding forgot a timer once a run that began after its due
/// time found no more events, assuming Tcl had fired it; with Tcl's clock set back 1 s between
/// the run's first look at it and Tcl's own, the timer stayed with Tcl and the pump never woke
/// for it again (the sleep timed out after 5 s, 8 runs in 8). Whichever of a run's reads the
/// step lands on, the sleep fires, a second later.
#[test]
fn a_clock_set_back_during_the_run_that_was_to_fire_a_timer_loses_no_sleep() {
    let _clock = take_the_clock();
    let tcl = Arc::new(Tcl::new(Schedule::Deadlines).expect("pump thread"));
    for step_at in 1..=3 {
        *STEPPED.lock().expect("not poisoned") = None;
        READS.store(0, Ordering::SeqCst);
        STEP_AT.store(step_at, Ordering::SeqCst);
        let delay = Duration::from_millis(200);
        let started = Instant::now();
        // Counted from when the timer falls due: Tcl's clock moves with the wall clock.
        COUNT_FROM_US.store(wall_us() + delay.as_micros() as i64, Ordering::SeqCst);
        let fired = smol::block_on(tcl.sleep(delay, Duration::from_secs(5)));
        let taken = started.elapsed();
        COUNT_FROM_US.store(i64::MAX, Ordering::SeqCst);
        let fired =
            fired.unwrap_or_else(|e| panic!("step at read {step_at}: {e:?} after {taken:?}"));
        // Set back before Tcl fired it, the timer is due a second later by Tcl's clock.
        if STEPPED
            .lock()
            .expect("not poisoned")
            .is_some_and(|at| at < fired.at)
        {
            assert!(
                taken >= Duration::from_millis(1_150),
                "step at read {step_at}: fired after {taken:?}"
            );
        }
    }
}
