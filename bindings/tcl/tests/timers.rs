//! Tcl 8.6 through ffi-pump: timers fire once each near their deadlines with no interval, scripts
//! return their results, a sleep that gives up deletes its timer in Tcl, nothing due means no run.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump::Error;
use ffi_pump_tcl::{Schedule, Tcl};
use futures_lite::FutureExt;

#[test]
fn a_thousand_timers_fire_once_each_near_their_deadlines() {
    const TIMERS: u64 = 1_000;
    let tcl = Arc::new(Tcl::new(Schedule::Deadlines).expect("pump thread"));
    smol::block_on(async {
        let tasks: Vec<_> = (0..TIMERS)
            .map(|i| {
                let tcl = tcl.clone();
                smol::spawn(async move {
                    let delay = Duration::from_millis(i % 200);
                    tcl.sleep(delay, Duration::from_secs(10)).await
                })
            })
            .collect();
        let mut late = Vec::new();
        for task in tasks {
            let fired = task.await.expect("the timer fired");
            // Tcl's clock is the wall clock, ours the monotonic one: allow them a little apart.
            assert!(
                fired.at + Duration::from_millis(1) >= fired.due,
                "fired {:?} before it was due",
                fired.due - fired.at
            );
            late.push(fired.at.saturating_duration_since(fired.due));
        }
        late.sort_unstable();
        let median = late[late.len() / 2];
        assert!(
            median < Duration::from_millis(2),
            "median lateness {median:?}"
        );
        assert_eq!(tcl.pending_timers().await, Ok(0));
    });
    let counters = tcl.counters();
    // 200 distinct deadlines, a run for each, and a few for the posts' kicks.
    let runs = counters.runs.load(Ordering::SeqCst);
    assert!(runs < 2 * TIMERS, "{runs} runs for {TIMERS} timers");
}

#[test]
fn eval_returns_the_result_or_the_error() {
    let tcl = Tcl::new(Schedule::Deadlines).expect("pump thread");
    smol::block_on(async {
        assert_eq!(tcl.eval("expr {6 * 7}").await, Ok(Ok("42".to_string())));
        assert_eq!(
            tcl.eval("error {failing on purpose}").await,
            Ok(Err("failing on purpose".to_string()))
        );
        assert_eq!(tcl.eval("set x 5; incr x").await, Ok(Ok("6".to_string())));
    });
}

#[test]
fn a_sleep_that_gives_up_deletes_its_timer() {
    let tcl = Tcl::new(Schedule::Deadlines).expect("pump thread");
    smol::block_on(async {
        let outcome = tcl
            .sleep(Duration::from_secs(600), Duration::from_millis(20))
            .await;
        assert_eq!(outcome, Err(Error::TimedOut));
        // Calls run in order on the interpreter's thread: the cancel hook ran before this.
        assert_eq!(tcl.pending_timers().await, Ok(0));
    });
}

#[test]
fn nothing_due_means_no_runs() {
    let tcl = Arc::new(Tcl::new(Schedule::Deadlines).expect("pump thread"));
    smol::block_on(async {
        let sleeper = {
            let tcl = tcl.clone();
            smol::spawn(async move {
                tcl.sleep(Duration::from_secs(600), Duration::from_secs(600))
                    .await
            })
        };
        while tcl.pump().stats().pending_waits == 0 {
            async_io_timer(Duration::from_millis(1)).await;
        }
        async_io_timer(Duration::from_millis(20)).await;
        let before = tcl.counters().runs.load(Ordering::SeqCst);
        let started = Instant::now();
        async_io_timer(Duration::from_millis(300)).await;
        let runs = tcl.counters().runs.load(Ordering::SeqCst) - before;
        assert_eq!(
            runs,
            0,
            "{runs} runs in {:?} with the only timer 10 minutes out",
            started.elapsed()
        );
        tcl.pump().close();
        assert_eq!(sleeper.await, Err(Error::Closed));
        tcl.pump()
            .closed()
            .await
            .expect("closed from outside the pump");
    });
}

/// A timer on whatever executor runs the test body.
async fn async_io_timer(after: Duration) {
    let timer = smol::Timer::after(after);
    timer.or(async { std::future::pending().await }).await;
}

/// Found by a hostile probe: results came back read as plain UTF-8 from Tcl's own form, so a NUL
/// (`C0 80` there) and a character past U+FFFF (a surrogate pair) became replacement
/// characters, and a script with a NUL in it was cut there.
#[test]
fn eval_hands_back_what_tcl_holds() {
    let tcl = Tcl::new(Schedule::Deadlines).expect("pump thread");
    smol::block_on(async {
        let eval = |script: &str| {
            let script = script.to_string();
            let tcl = &tcl;
            async move { tcl.eval(&script).await.expect("pump").expect("script") }
        };
        assert_eq!(eval("format %c 0").await, "\0");
        assert_eq!(eval("string range 😀x 0 end").await, "😀x");
        assert_eq!(eval("set a \"\0b\"").await, "\0b");
    });
}

/// Found by a hostile probe of the bindings: a lone surrogate (which UTF-8 cannot hold) came back
/// as three replacement characters, one per byte of Tcl's form of it, where it is one character.
#[test]
fn a_lone_surrogate_comes_back_as_one_replacement_character() {
    let tcl = Tcl::new(Schedule::Deadlines).expect("pump thread");
    let result = smol::block_on(tcl.eval("set x \"a\\uD800b\""));
    assert_eq!(result, Ok(Ok("a\u{FFFD}b".to_string())));
}

/// Found by the same probe: `Schedule::Every(Duration::MAX)` added the period to the clock and
/// the loop's thread panicked (overflow), closing the interpreter's pump for good. Such a period
/// never comes: a sleep times out, and the interpreter goes on.
#[test]
fn a_period_past_the_clocks_range_never_comes_and_breaks_nothing() {
    let tcl = Tcl::new(Schedule::Every(Duration::MAX)).expect("pump thread");
    smol::block_on(async {
        let slept = tcl
            .sleep(Duration::from_millis(5), Duration::from_millis(100))
            .await;
        assert_eq!(slept, Err(Error::TimedOut));
        assert_eq!(tcl.eval("expr {1 + 1}").await, Ok(Ok("2".to_string())));
        assert!(!tcl.pump().stats().panicked);
    });
}

/// Found by a hostile probe: the delay went to whole microseconds before it was rounded up to
/// Tcl's milliseconds, so a sleep under a microsecond fired at once (after ~0.4 ms).
#[test]
fn a_sleep_under_a_microsecond_fires_no_earlier_than_a_millisecond_on() {
    let tcl = Tcl::new(Schedule::Deadlines).expect("pump thread");
    smol::block_on(async {
        for delay in [Duration::from_nanos(1), Duration::from_nanos(999)] {
            let started = Instant::now();
            let fired = tcl
                .sleep(delay, Duration::from_secs(10))
                .await
                .expect("fired");
            let after = fired.at - started;
            assert!(
                after >= Duration::from_millis(1),
                "{delay:?}: after {after:?}"
            );
        }
    });
}

/// Found by a hostile probe: a script nested 5 000 deep overflowed the loop's thread's stack
/// (std's 2 MiB) and aborted the process; tclsh, on a main thread's 8 MiB, answers it with an
/// error, and so does the binding now.
#[test]
fn a_deeply_nested_script_is_an_error_not_a_crash() {
    let tcl = Tcl::new(Schedule::Deadlines).expect("pump thread");
    let n = 10_000;
    let script = format!("string length {}a{}", "[list ".repeat(n), "]".repeat(n));
    let result = smol::block_on(tcl.eval(&script));
    assert!(matches!(result, Ok(Err(_))), "{result:?}");
    assert_eq!(
        smol::block_on(tcl.eval("expr {1 + 1}")),
        Ok(Ok("2".to_string()))
    );
}
