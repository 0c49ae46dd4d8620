//! `check_budget` bounds a pass of slow checks, whatever comes before them: found by a hostile
//! probe (the clock was read every 256 entries of a column: 64 checks of 5 ms ran back to back
//! and a kick waited 317 ms for its run), and by a review of the fix (one cheap entry at a
//! round's start, or a quick column before the slow one, set the stride to 256 at once). A file
//! of its own: the cases run one after another, each holding a core with its checks.
mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually, pending, Rt};
use ffi_pump::Pump;

static RELEASE: AtomicBool = AtomicBool::new(false);

/// A waker that counts its wakes.
struct Count(std::sync::atomic::AtomicU64);

impl std::task::Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn spin(ms: u64) {
    let spun = Instant::now();
    while spun.elapsed() < Duration::from_millis(ms) {
        std::hint::spin_loop();
    }
}

/// How long a kick waited for its run in the middle of a round of `slow` slow checks, at the
/// longest of `tries`, and how long a whole round of them took just before.
async fn kicks_in_a_round(
    pump: &Pump,
    runs: &AtomicU32,
    checks: &AtomicU32,
    slow: u32,
    tries: usize,
) -> (Duration, Duration) {
    let (seen, started) = (checks.load(Ordering::SeqCst), Instant::now());
    pump.kick();
    eventually("a whole round", || {
        checks.load(Ordering::SeqCst) >= seen + slow
    })
    .await;
    let round = started.elapsed();
    let mut longest = Duration::ZERO;
    for _ in 0..tries {
        let seen = checks.load(Ordering::SeqCst);
        pump.kick();
        eventually("a round under way", || checks.load(Ordering::SeqCst) > seen).await;
        let (before, kicked) = (runs.load(Ordering::SeqCst), Instant::now());
        pump.kick();
        eventually("the kick's run", || runs.load(Ordering::SeqCst) > before).await;
        longest = longest.max(kicked.elapsed());
    }
    (longest, round)
}

/// `quick(i)`: whether wait i's check is quick. `done_at_second(i)`: the check ends its wait at
/// its second call. Waits are registered one at a time, so wait i has key i.
/// A pump with a 1 ms check budget and no tick, driven by a thread of its own; its runs,
/// counted. Call inside `block_on`.
fn counted_pump() -> (Pump, Arc<AtomicU32>) {
    let runs = Arc::new(AtomicU32::new(0));
    let counted = runs.clone();
    let builder = Pump::builder()
        .interval(Duration::from_secs(3600))
        .check_budget(Duration::from_millis(1));
    let pump = Rt::Thread.pump_with(builder, move || {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    (pump, runs)
}

/// The longest a kick waited for its run in the middle of a round, and a whole round.
fn longest_kick(
    n: u32,
    quick: fn(u32) -> bool,
    done_at_second: fn(u32) -> bool,
) -> (Duration, Duration) {
    Rt::Thread.block_on(async {
        let (pump, runs) = counted_pump();
        let checks = Arc::new(AtomicU32::new(0));
        let mut waits = Vec::new();
        let mut stays = 0;
        for i in 0..n {
            let counted = checks.clone();
            let mut calls = 0;
            let check = move || {
                calls += 1;
                if done_at_second(i) && calls >= 2 && RELEASE.load(Ordering::SeqCst) {
                    return true;
                }
                if !quick(i) {
                    counted.fetch_add(1, Ordering::SeqCst);
                    spin(5);
                }
                false
            };
            waits.push(Rt::Thread.spawn(pump.wait_until(check).timeout(Duration::from_secs(60))));
            stays += 1;
            pending(&pump, stays).await;
        }
        // Let the waits that end at their second check end (a round after a run).
        RELEASE.store(true, Ordering::SeqCst);
        pump.kick();
        let ends = (0..n).filter(|&i| done_at_second(i)).count();
        pending(&pump, n as usize - ends).await;
        let slow = n - (0..n).filter(|&i| quick(i)).count() as u32;
        let measured = kicks_in_a_round(&pump, &runs, &checks, slow, 5).await;
        pump.close();
        for wait in waits {
            let _ = wait.await;
        }
        measured
    })
}

/// The fixed test's case, all 64 checks slow (baseline).
fn all_slow() {
    let (longest, round) = longest_kick(64, |_| false, |_| false);
    assert!(
        longest < round / 3,
        "a kick waited {longest:?} (a whole round: {round:?})"
    );
}

/// The same 64 slow checks, but the slot at the round's start is free (its wait ended): the
/// first look sees one empty key (it set the stride to 256 at once, and every slow check ran).
fn a_hole_at_the_rounds_start() {
    let (longest, round) = longest_kick(65, |i| i == 0, |i| i == 0);
    assert!(
        longest < round / 3,
        "a kick waited {longest:?} (a whole round: {round:?})"
    );
}

/// One quick check at the round's start, then 64 slow ones (one closure type, one column).
fn one_quick_check_first() {
    let (longest, round) = longest_kick(65, |i| i == 0, |_| false);
    assert!(
        longest < round / 3,
        "a kick waited {longest:?} (a whole round: {round:?})"
    );
}

/// Two columns: 3 000 checks of ~1 µs (one closure type), then 64 of 5 ms (another). A pass that
/// stops inside the first column goes on with it at the next pass, whose clock paces on the
/// 1 µs checks (stride ~250) and then meets the slow column: it carried that stride over.
fn a_slow_column_after_a_quick_one() {
    Rt::Thread.block_on(async {
        let (pump, runs) = counted_pump();
        let mut waits = Vec::new();
        for _ in 0..3000 {
            let check = move || {
                let spun = Instant::now();
                while spun.elapsed() < Duration::from_micros(1) {}
                false
            };
            waits.push(Rt::Thread.spawn(pump.wait_until(check).timeout(Duration::from_secs(60))));
        }
        pending(&pump, 3000).await;
        let checks = Arc::new(AtomicU32::new(0));
        for _ in 0..64 {
            let counted = checks.clone();
            let check = move || {
                counted.fetch_add(1, Ordering::SeqCst);
                spin(5);
                false
            };
            waits.push(Rt::Thread.spawn(pump.wait_until(check).timeout(Duration::from_secs(60))));
        }
        pending(&pump, 3064).await;
        // Each checked once as it arrived (with no budget: left as it is); the rounds after
        // runs are what is measured.
        eventually("every slow wait checked", || {
            checks.load(Ordering::SeqCst) >= 64
        })
        .await;
        let (longest, round) = kicks_in_a_round(&pump, &runs, &checks, 64, 10).await;
        pump.close();
        for wait in waits {
            let _ = wait.await;
        }
        assert!(
            longest < round / 3,
            "a kick waited {longest:?} (a whole round: {round:?})"
        );
    });
}

#[test]
fn a_pass_of_slow_checks_gives_a_kick_its_run_at_its_budget() {
    all_slow();
    a_hole_at_the_rounds_start();
    one_quick_check_first();
    a_slow_column_after_a_quick_one();
}

/// Holds the loop lock: kicks a run whose pass calls a check that stays until the flag this
/// returns is cleared, and returns once it is in. With the task of that check's wait.
async fn hold_the_loop_lock(pump: &Pump) -> (Arc<AtomicBool>, impl std::future::Future) {
    let (hold, in_pass) = (
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicBool::new(false)),
    );
    let (held, entered) = (hold.clone(), in_pass.clone());
    let mut first = true;
    let holder = Rt::Thread.spawn(
        pump.wait_until(move || {
            if !std::mem::take(&mut first) && held.load(Ordering::SeqCst) {
                entered.store(true, Ordering::SeqCst);
                while held.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
            }
            false
        })
        .timeout(Duration::from_secs(60)),
    );
    pending(pump, 1).await;
    pump.kick();
    eventually("the pass holds the loop lock", || {
        in_pass.load(Ordering::SeqCst)
    })
    .await;
    (hold, holder)
}

/// Waits that first poll while a pass holds the loop lock (a burst of them, say) are evaluated
/// as it lets go, within the check budget, the driver going on with the rest as with a round's
/// checks. Before, in one stretch with no budget: 64 checks of 5 ms held the lock for 320 ms,
/// and a kick waited for all of them. Found by a hostile probe.
#[test]
fn a_burst_of_arrivals_gives_a_kick_its_run_at_the_budget() {
    Rt::Thread.block_on(async {
        let (pump, runs) = counted_pump();
        let (hold, holder) = hold_the_loop_lock(&pump).await;
        let checks = Arc::new(AtomicU32::new(0));
        let mut waits = Vec::new();
        for _ in 0..64 {
            let counted = checks.clone();
            let mut wait = Box::pin(pump.wait_until(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                spin(5);
                false
            }));
            assert!(futures_lite::future::poll_once(wait.as_mut())
                .await
                .is_none());
            waits.push(wait);
        }
        assert_eq!(
            checks.load(Ordering::SeqCst),
            0,
            "they arrived while the lock was held"
        );
        hold.store(false, Ordering::SeqCst);
        eventually("the arrivals' checks run", || {
            checks.load(Ordering::SeqCst) > 0
        })
        .await;
        let (before, kicked) = (runs.load(Ordering::SeqCst), Instant::now());
        pump.kick();
        eventually("the kick's run", || runs.load(Ordering::SeqCst) > before).await;
        let waited = kicked.elapsed();
        assert!(
            waited < Duration::from_millis(100),
            "a kick waited {waited:?} for 64 checks of 5 ms with a 1 ms budget"
        );
        pump.close();
        drop(waits);
        let _ = holder.await;
    });
}

/// The arrivals a budget cut short are checked on without a run, as a round's are: each of 64
/// waits whose 2 ms check holds ends, and the C loop ran no more. (Checked in one go, as before
/// the budget, they ended too: this guards the hand-over to the driver, without which all but
/// the first stay pending.)
#[test]
fn arrivals_left_by_the_budget_end_without_a_run() {
    Rt::Thread.block_on(async {
        let (pump, runs) = counted_pump();
        let (hold, holder) = hold_the_loop_lock(&pump).await;
        let mut waits = Vec::new();
        for _ in 0..64 {
            let check = || {
                spin(2);
                true
            };
            let mut wait = Box::pin(pump.wait_until(check).timeout(Duration::from_secs(30)));
            assert!(futures_lite::future::poll_once(wait.as_mut())
                .await
                .is_none());
            waits.push(wait);
        }
        let before = runs.load(Ordering::SeqCst);
        hold.store(false, Ordering::SeqCst);
        for wait in waits {
            assert_eq!(wait.await, Ok(()), "a wait whose check holds ends");
        }
        assert_eq!(
            runs.load(Ordering::SeqCst),
            before,
            "no run for the arrivals' checks"
        );
        pump.close();
        let _ = holder.await;
    });
}

/// Found by a probe of `Pump::turn`'s docs: with a 1 ns budget, a turn right after 2 000 waits
/// registered returned with one of them not yet woken, against "every wait whose condition held
/// when it ended has been woken — even when its checks overran the check budget": the turn's
/// own pass ended the round while the driver's pass before it, which ended that wait, was still
/// waking it with the lock let go. 8 runs of 20 failed (each a fresh process: the first pump of
/// one); 0 of 30 since the turn waits for passes still waking.
#[test]
fn a_turn_returns_after_every_wait_its_round_ended_was_woken() {
    use std::future::Future;
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::task::{Context, Waker};

    const WAITS: u64 = 2_000;
    let runs = Arc::new(AtomicU64::new(0));
    let counted = runs.clone();
    let pump = Pump::builder()
        .check_budget(Duration::from_nanos(1))
        .interval(Duration::from_secs(3600))
        .build(move || {
            counted.fetch_add(1, SeqCst);
        })
        .expect("valid settings");
    pump.spawn_on(ffi_pump::Backend::Thread).expect("a thread");
    let woken = Arc::new(Count(AtomicU64::new(0)));
    let waker = Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    let mut waits: Vec<_> = (0..WAITS)
        .map(|_| {
            let runs = runs.clone();
            Box::pin(pump.wait_until(move || {
                std::hint::black_box((0..100).sum::<u64>());
                runs.load(SeqCst) >= 1
            }))
        })
        .collect();
    for wait in &mut waits {
        assert!(wait.as_mut().poll(&mut cx).is_pending());
    }
    std::thread::sleep(Duration::from_millis(100));
    futures_lite::future::block_on(common::within("a turn", pump.turn())).expect("a turn");
    let when_it_returned = woken.0.load(SeqCst);
    pump.close();
    assert_eq!(
        when_it_returned, WAITS,
        "waits woken when the turn returned"
    );
}

/// 100 checks of 1 ms that never hold, a 500 µs budget, and a kick every 2 ms: a wait of
/// another check type whose condition holds is woken, and a turn returns. Found by a hostile
/// probe: each run began the round anew, from the column a pass had stopped in, so while runs
/// came faster than that column's checks took, the columns after it were never reached — the
/// wait hung until its timeout (6 of 6, on every backend), and a turn took up to 4.8 s.
fn kicks_faster_than_a_round(rt: Rt) {
    rt.block_on(async move {
        let builder = Pump::builder()
            .interval(Duration::from_secs(3600))
            .check_budget(Duration::from_micros(500));
        let pump = rt.pump_with(builder, || {});
        let slow: Vec<_> = (0..100)
            .map(|_| {
                let wait = pump.wait_until(|| {
                    spin(1);
                    false
                });
                rt.spawn(wait.timeout(Duration::from_secs(30)))
            })
            .collect();
        pending(&pump, 100).await;
        let holds = Arc::new(AtomicBool::new(false));
        let flag = holds.clone();
        let target = pump.wait_until(move || flag.load(Ordering::SeqCst));
        let target = rt.spawn(target.timeout(Duration::from_secs(10)));
        pending(&pump, 101).await;
        let stop = Arc::new(AtomicBool::new(false));
        let (kicker, stopped) = (pump.kicker(), stop.clone());
        let kicks = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                kicker.kick();
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        holds.store(true, Ordering::SeqCst);
        let woken = target.await;
        let turned = common::within("a turn under kicks", pump.turn()).await;
        stop.store(true, Ordering::SeqCst);
        kicks.join().expect("the kicks");
        pump.close();
        for wait in slow {
            let _ = wait.await;
        }
        assert_eq!(woken, Ok(()), "the wait whose condition held, under kicks");
        assert_eq!(turned, Ok(()), "a turn under kicks");
    });
}

#[test]
fn kicks_faster_than_a_round_starve_no_wait_on_a_thread() {
    kicks_faster_than_a_round(Rt::Thread);
}

#[test]
fn kicks_faster_than_a_round_starve_no_wait_on_the_loops_thread() {
    kicks_faster_than_a_round(Rt::LoopThread);
}

/// Under a stream of kicks that cut every round, a turn still returns only once every wait
/// whose condition its run made hold has been woken: a round that ends after later runs came
/// is followed by the latest run's, which skips only what the ended one checked after that run.
#[test]
fn a_turn_under_kicks_returns_after_every_wait_its_run_made_hold_was_woken() {
    use std::future::Future;
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::task::{Context, Waker};

    fn spin_us(us: u64) {
        let spun = Instant::now();
        while spun.elapsed() < Duration::from_micros(us) {
            std::hint::spin_loop();
        }
    }
    const EACH: u64 = 150;
    for _ in 0..5 {
        // What the library says, as of its last run: changes at runs only.
        let published = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(AtomicU64::new(0));
        let (from, to) = (published.clone(), seen.clone());
        let pump = Pump::builder()
            .check_budget(Duration::from_micros(100))
            .interval(Duration::from_secs(3600))
            .build(move || to.store(from.load(SeqCst), SeqCst))
            .expect("valid settings");
        pump.spawn_on(ffi_pump::Backend::Thread).expect("a thread");
        let woken = Arc::new(Count(AtomicU64::new(0)));
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        // Two check types: two columns.
        let mut waits: Vec<std::pin::Pin<Box<dyn Future<Output = _>>>> = Vec::new();
        for _ in 0..EACH {
            let (a, b) = (seen.clone(), seen.clone());
            waits.push(Box::pin(pump.wait_until(move || {
                spin_us(20);
                a.load(SeqCst) == 1
            })));
            waits.push(Box::pin(pump.wait_until(move || {
                spin_us(10);
                b.load(SeqCst) >= 1
            })));
        }
        for wait in &mut waits {
            assert!(wait.as_mut().poll(&mut cx).is_pending());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (kicker, stopped) = (pump.kicker(), stop.clone());
        let kicks = std::thread::spawn(move || {
            while !stopped.load(SeqCst) {
                kicker.kick();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        // Rounds cut and runs coming, for a while.
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(woken.0.load(SeqCst), 0, "no condition held yet");
        published.store(1, SeqCst);
        futures_lite::future::block_on(common::within("a turn", pump.turn())).expect("a turn");
        let when_it_returned = woken.0.load(SeqCst);
        stop.store(true, SeqCst);
        kicks.join().expect("the kicks");
        pump.close();
        assert_eq!(
            when_it_returned,
            2 * EACH,
            "waits woken when the turn returned"
        );
    }
}
