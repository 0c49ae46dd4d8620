//! Stress: rounds of thousands of waits with random timeouts, random drops and a close at a random
//! moment, on every backend and both strategies, until at least 100 000 waits have ended (or for
//! `FFI_PUMP_STRESS_SECS` seconds, if longer). Every round checks that nothing hung, nothing was
//! lost, and the C loop was never entered twice.

mod common;

use std::time::{Duration, Instant};

use async_io::Timer;
use common::{assert_clean, Rt, STRATEGIES};
use fake_loop::FakeLoop;
use ffi_pump::{Error, Pump};
use futures_lite::FutureExt;

const WAITS_PER_ROUND: u32 = 5_000;
const MIN_WAITS: u64 = 100_000;

/// How one wait of a round is set up.
#[derive(Debug, Clone, Copy)]
struct Plan {
    armed: bool,
    timeout: Option<Duration>,
    drop_after: Option<Duration>,
}

#[derive(Debug, Default)]
struct Tally {
    rounds: u64,
    waits: u64,
    ok: u64,
    timed_out: u64,
    closed: u64,
    dropped: u64,
}

fn stress(rt: Rt) {
    let budget = std::env::var("FFI_PUMP_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::ZERO, Duration::from_secs);
    let started = Instant::now();
    let mut tally = Tally::default();
    while tally.waits < MIN_WAITS || started.elapsed() < budget {
        round(rt, &mut tally);
    }
    eprintln!(
        "stress {rt:?}: {} waits in {} rounds, {:.1} s: {} ok, {} timed out, {} closed, {} dropped",
        tally.waits,
        tally.rounds,
        started.elapsed().as_secs_f64(),
        tally.ok,
        tally.timed_out,
        tally.closed,
        tally.dropped
    );
}

fn round(rt: Rt, tally: &mut Tally) {
    let strategy = STRATEGIES[fastrand::usize(..STRATEGIES.len())];
    let close_after = fastrand::bool().then(|| Duration::from_millis(fastrand::u64(0..150)));
    let timeout = || Duration::from_millis(fastrand::u64(10..150));
    let plans: Vec<Plan> = (0..WAITS_PER_ROUND)
        .map(|_| {
            let mut plan = Plan {
                armed: fastrand::u8(..10) < 8,
                timeout: fastrand::bool().then(timeout),
                drop_after: (fastrand::u8(..10) < 2)
                    .then(|| Duration::from_millis(fastrand::u64(0..100))),
            };
            // A wait on an id that never becomes ready needs something to end it.
            if !plan.armed && close_after.is_none() && plan.drop_after.is_none() {
                plan.timeout.get_or_insert_with(timeout);
            }
            plan
        })
        .collect();
    let fx = std::sync::Arc::new(FakeLoop::new(WAITS_PER_ROUND));
    for (id, plan) in (0..).zip(&plans) {
        if plan.armed {
            fx.arm_in(id, Duration::from_millis(fastrand::u64(0..100)));
        }
    }
    rt.block_on(async {
        let pump = rt.pump(Pump::builder().strategy(strategy), &fx);
        let tasks: Vec<_> = (0..)
            .zip(&plans)
            .map(|(id, &plan)| {
                let (pump, fx) = (pump.clone(), fx.clone());
                rt.spawn(async move {
                    let mut wait = pump.wait_until(move || fx.check(id));
                    if let Some(timeout) = plan.timeout {
                        wait = wait.timeout(timeout);
                    }
                    match plan.drop_after {
                        None => Some(wait.await),
                        Some(after) => {
                            async { Some(wait.await) }
                                .or(async {
                                    Timer::after(after).await;
                                    None
                                })
                                .await
                        }
                    }
                })
            })
            .collect();
        if let Some(after) = close_after {
            Timer::after(after).await;
            pump.close();
        }
        for ((id, plan), task) in (0..).zip(&plans).zip(tasks) {
            let outcome = task
                .or(async {
                    Timer::after(Duration::from_secs(20)).await;
                    panic!("wait {id} ({plan:?}, {strategy:?}) hung");
                })
                .await;
            tally.waits += 1;
            match outcome {
                None => {
                    assert!(plan.drop_after.is_some(), "wait {id} vanished: {plan:?}");
                    tally.dropped += 1;
                }
                Some(Ok(())) => {
                    assert!(
                        plan.armed && fx.ready_at_ns(id).is_some(),
                        "wait {id} succeeded on an id not ready"
                    );
                    tally.ok += 1;
                }
                Some(Err(Error::TimedOut)) => {
                    assert!(
                        plan.timeout.is_some(),
                        "wait {id} timed out without a timeout"
                    );
                    tally.timed_out += 1;
                }
                Some(Err(Error::Closed)) => {
                    assert!(
                        close_after.is_some(),
                        "wait {id} closed, but nobody closed the pump"
                    );
                    tally.closed += 1;
                }
                Some(other) => panic!("wait {id} ({plan:?}): unexpected {other:?}"),
            }
            // Nothing lost: an armed wait that nothing else could end must have succeeded.
            if plan.armed
                && plan.timeout.is_none()
                && plan.drop_after.is_none()
                && close_after.is_none()
            {
                assert_eq!(
                    outcome,
                    Some(Ok(())),
                    "wait {id} ({strategy:?}) lost its wake-up"
                );
            }
        }
        assert_eq!(
            pump.stats().pending_waits,
            0,
            "waits left pending after the round"
        );
        pump.close();
    });
    assert_clean(&fx);
    tally.rounds += 1;
}

#[cfg(feature = "smol")]
#[test]
fn smol() {
    stress(Rt::Smol);
}

#[cfg(feature = "async-std")]
#[test]
fn async_std() {
    stress(Rt::AsyncStd);
}

#[cfg(feature = "tokio")]
#[test]
fn tokio() {
    stress(Rt::Tokio);
}

#[test]
fn thread() {
    stress(Rt::Thread);
}

#[test]
fn loop_thread() {
    stress(Rt::LoopThread);
}
