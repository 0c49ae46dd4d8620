//! What a turn promises when it returns: every wait its round ended has been woken — the
//! pump-evaluated ones and the run's listeners — and a turn made from code the pump runs as it
//! lets go (what a check captured, dropped) does not wait for itself. Made deterministic by
//! gates: points where one thread stops until the test lets it go on.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use ffi_pump::{Backend, Pump};

const LONG: Duration = Duration::from_secs(10);

struct Count(AtomicU64);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}
fn counting() -> (Arc<Count>, Waker) {
    let count = Arc::new(Count(AtomicU64::new(0)));
    (count.clone(), Waker::from(count))
}

/// A point where one thread stops until another lets it go on.
struct Gate {
    armed: AtomicBool,
    entered: Mutex<Sender<()>>,
    go: Mutex<Receiver<()>>,
}
struct GateHandle {
    entered: Receiver<()>,
    go: Sender<()>,
}
fn gate() -> (Arc<Gate>, GateHandle) {
    let (entered_tx, entered) = channel();
    let (go, go_rx) = channel();
    (
        Arc::new(Gate {
            armed: AtomicBool::new(false),
            entered: Mutex::new(entered_tx),
            go: Mutex::new(go_rx),
        }),
        GateHandle { entered, go },
    )
}
impl Gate {
    /// Stops here if armed (once per arming).
    fn pass(&self) {
        if self.armed.swap(false, SeqCst) {
            let _ = self.entered.lock().unwrap().send(());
            let _ = self.go.lock().unwrap().recv_timeout(LONG);
        }
    }
}
impl GateHandle {
    fn entered(&self) {
        self.entered
            .recv_timeout(LONG)
            .expect("the gate was reached");
    }
    fn go(&self) {
        self.go.send(()).unwrap();
    }
}

fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < LONG, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(waker))
}

/// Dropped, says so and blocks until told to go on.
struct BlockOnDrop(Arc<Gate>);
impl Drop for BlockOnDrop {
    fn drop(&mut self) {
        self.0.pass();
    }
}

/// Found by a hostile probe: a turn that joined a driver's run (it took the loop lock right
/// after the run let go) waited for the run's pump-evaluated waits to be woken, not for its
/// announcement, which wakes the broadcast waits (`wait_until_local`): the driver announced
/// only after dropping its pass's entries. With a check whose capture blocks in its drop, the
/// turn returned `Ok` with such a wait unwoken, 10 runs in 10, against `Pump::turn`'s "every
/// wait whose condition held when it ended has been woken". A run now tells its waits and its
/// listeners before its count drops, and drops its entries after.
#[test]
fn a_turn_that_joins_a_run_returns_once_its_listeners_were_woken() {
    let flag = Arc::new(AtomicBool::new(false));
    let set_flag = Arc::new(AtomicBool::new(false));
    let (run_gate, run) = gate();
    let pump = {
        let (flag, set_flag, run_gate) = (flag.clone(), set_flag.clone(), run_gate.clone());
        Pump::builder()
            .interval(Duration::from_secs(3600))
            .build(move || {
                run_gate.pass();
                if set_flag.load(SeqCst) {
                    flag.store(true, SeqCst);
                }
            })
            .expect("valid settings")
    };
    pump.spawn_on(Backend::Thread).expect("a thread");

    // R1, under way while the turn is called: it does not count for the turn.
    run_gate.armed.store(true, SeqCst);
    pump.kick();
    run.entered();
    let (turn_woken, turn_waker) = counting();
    let mut turn = Box::pin(pump.turn());
    assert!(poll(turn.as_mut(), &turn_waker).is_pending());
    run.go();
    until("R1's announcement", || turn_woken.0.load(SeqCst) >= 1);

    // A broadcast wait and a pump-evaluated one, whose conditions hold after the next run.
    let (local_woken, local_waker) = counting();
    let f1 = flag.clone();
    let mut local = Box::pin(pump.wait_until_local(move || f1.load(SeqCst)));
    assert!(poll(local.as_mut(), &local_waker).is_pending());
    let (drop_gate, dropping) = gate();
    let (evaluated_woken, evaluated_waker) = counting();
    let f2 = flag.clone();
    let capture = BlockOnDrop(drop_gate.clone());
    let mut evaluated = Box::pin(pump.wait_until(move || {
        let _ = &capture;
        f2.load(SeqCst)
    }));
    assert!(poll(evaluated.as_mut(), &evaluated_waker).is_pending());

    // A wait's first check holds the loop lock (no run going on): the turn queues for it.
    let (check_gate, check) = gate();
    check_gate.armed.store(true, SeqCst);
    let checker = {
        let pump = pump.clone();
        std::thread::spawn(move || {
            let _ = futures_lite::future::block_on(
                pump.wait_until_local(move || {
                    check_gate.pass();
                    false
                })
                .timeout(LONG),
            );
        })
    };
    check.entered();
    assert!(poll(turn.as_mut(), &turn_waker).is_pending());
    // A kick: the driver runs R2 once the checker lets go (the turn is not polled meanwhile).
    set_flag.store(true, SeqCst);
    run_gate.armed.store(true, SeqCst);
    drop_gate.armed.store(true, SeqCst);
    pump.kick();
    check.go();
    run.entered();
    assert!(
        poll(turn.as_mut(), &turn_waker).is_pending(),
        "R2 holds the lock"
    );
    run.go();
    // R2 let go of the lock and woke the pump-evaluated wait; it drops that wait's entry next,
    // and announces the round after.
    dropping.entered();
    assert_eq!(evaluated_woken.0.load(SeqCst), 1);
    let turned = poll(turn.as_mut(), &turn_waker);
    let local_when_turn_returned = local_woken.0.load(SeqCst);
    dropping.go();
    until("R2's announcement", || local_woken.0.load(SeqCst) == 1);
    pump.close();
    checker.join().unwrap();
    assert!(matches!(turned, Poll::Ready(Ok(()))), "{turned:?}");
    assert!(flag.load(SeqCst), "the condition held at R2's end");
    assert_eq!(
        local_when_turn_returned, 1,
        "turn returned Ok while a wait whose condition held at its run's end was not woken"
    );
}

/// Turns the pump as it drops (giving up after 5 s), and says how that went.
struct TurnOnDrop {
    pump: Option<Pump>,
    outcome: Arc<AtomicU64>,
}
impl Drop for TurnOnDrop {
    fn drop(&mut self) {
        let Some(pump) = self.pump.take() else { return };
        let turned = futures_lite::future::block_on(futures_lite::FutureExt::or(
            async { Some(pump.turn().await) },
            async {
                async_io::Timer::after(Duration::from_secs(5)).await;
                None
            },
        ));
        self.outcome.store(
            match turned {
                Some(Ok(())) => 1,
                Some(Err(_)) => 2,
                None => 3,
            },
            SeqCst,
        );
    }
}

/// Found by the same probe: a turn waits until every pass that let go of the loop lock woke its
/// waits (since da0d30d). A run's guard, as it let go, evaluated the waits that arrived
/// meanwhile with the run's own count still up, and dropped the entries that pass took out, so
/// a `turn` made from the drop of what their checks captured (not inside the pump: the crate
/// docs' re-entrancy list does not name it) waited for ever for its own thread (10 runs in 10).
/// A pass's count now drops before its entries do, and a run's before the arrivals' pass.
#[test]
fn a_turn_from_the_drop_of_what_a_check_captured_returns() {
    let flag = Arc::new(AtomicBool::new(false));
    let set_flag = Arc::new(AtomicBool::new(false));
    let pump = {
        let (flag, set_flag) = (flag.clone(), set_flag.clone());
        Pump::builder()
            .interval(Duration::from_secs(3600))
            .build(move || {
                if set_flag.load(SeqCst) {
                    flag.store(true, SeqCst);
                }
            })
            .expect("valid settings")
    };
    pump.spawn_on(Backend::Thread).expect("a thread");
    // W1: its check stops, once armed, in the round's pass.
    let (check_gate, check) = gate();
    let (w1_woken, w1_waker) = counting();
    let mut w1 = {
        let (flag, check_gate) = (flag.clone(), check_gate.clone());
        Box::pin(pump.wait_until(move || {
            check_gate.pass();
            flag.load(SeqCst)
        }))
    };
    assert!(poll(w1.as_mut(), &w1_waker).is_pending());
    set_flag.store(true, SeqCst);
    check_gate.armed.store(true, SeqCst);
    pump.kick();
    check.entered();
    // W2 arrives while the run's pass holds the lock: the run's guard evaluates it as it lets go.
    let outcome = Arc::new(AtomicU64::new(0));
    let capture = TurnOnDrop {
        pump: Some(pump.clone()),
        outcome: outcome.clone(),
    };
    let (w2_woken, w2_waker) = counting();
    let mut w2 = {
        let flag = flag.clone();
        Box::pin(pump.wait_until(move || {
            let _ = &capture;
            flag.load(SeqCst)
        }))
    };
    assert!(poll(w2.as_mut(), &w2_waker).is_pending());
    check.go();
    until("the capture's turn", || outcome.load(SeqCst) != 0);
    let turned = outcome.load(SeqCst);
    pump.close();
    assert_eq!(w1_woken.0.load(SeqCst), 1);
    assert_eq!(w2_woken.0.load(SeqCst), 1);
    assert_eq!(
        turned, 1,
        "the turn in the capture's drop: 1 Ok, 2 Err, 3 hung for 5 s"
    );
}

/// A waker that owns a [`TurnOnDrop`]: a task whose last waker goes with its wake.
struct OwningWaker(#[allow(dead_code)] TurnOnDrop);

impl Wake for OwningWaker {
    fn wake(self: Arc<Self>) {}
}

/// Found by a review of the fix above: a pass woke its waits by value, with its count up, so a
/// waker's last reference went there, and a task whose drop turns the pump waited for ever for
/// its own thread (before that fix too). Wakers are now woken by reference and dropped once
/// the pass's count ended.
#[test]
fn a_turn_from_the_drop_of_a_woken_waker_returns() {
    let flag = Arc::new(AtomicBool::new(false));
    let pump = Pump::builder()
        .interval(Duration::from_secs(3600))
        .build(|| {})
        .expect("valid settings");
    pump.spawn_on(Backend::Thread).expect("a thread");
    let outcome = Arc::new(AtomicU64::new(0));
    let waker = Waker::from(Arc::new(OwningWaker(TurnOnDrop {
        pump: Some(pump.clone()),
        outcome: outcome.clone(),
    })));
    let f = flag.clone();
    let mut wait = Box::pin(pump.wait_until(move || f.load(SeqCst)));
    assert!(poll(wait.as_mut(), &waker).is_pending());
    drop(waker); // the registry's clone is the last one
    flag.store(true, SeqCst);
    pump.kick();
    until("the turn in the waker's drop", || outcome.load(SeqCst) != 0);
    let turned = outcome.load(SeqCst);
    pump.close();
    assert_eq!(
        turned, 1,
        "the turn in the waker's drop: 1 Ok, 2 Err, 3 hung for 5 s"
    );
}

/// Found by the same review: the first fix above had a run tell its listeners and end its
/// count before it evaluated the waits that registered while it held the lock, so a turn woken
/// by the run returned `Ok` with such a wait, whose condition held at the run's end, unwoken
/// (5 runs in 5). A run now evaluates them before its count ends.
#[test]
fn a_turn_returns_only_once_the_runs_arrivals_were_woken() {
    let flag = Arc::new(AtomicBool::new(false));
    let set_flag = Arc::new(AtomicBool::new(false));
    let (pump, _handle) = {
        let (flag, set_flag) = (flag.clone(), set_flag.clone());
        Pump::builder()
            .build_with_state(
                |_| Ok(()),
                move |_, _| {
                    if set_flag.load(SeqCst) {
                        flag.store(true, SeqCst);
                    }
                    None
                },
            )
            .expect("the loop's thread starts")
    };
    let (check_gate, check) = gate();
    let (drop_gate, dropping) = gate();
    let (w1_woken, w1_waker) = counting();
    let mut w1 = {
        let (flag, check_gate) = (flag.clone(), check_gate.clone());
        let capture = BlockOnDrop(drop_gate.clone());
        Box::pin(pump.wait_until(move || {
            let _ = &capture;
            check_gate.pass();
            flag.load(SeqCst)
        }))
    };
    assert!(poll(w1.as_mut(), &w1_waker).is_pending());
    // The run W1's first poll asks for (the loop says no deadline until it first runs) comes
    // first: left to come later, it could be the run whose pass the gate stops below, one the
    // turn does not count, and the turn then waits for its own run behind the stopped drop (1
    // run in 150 failed so).
    futures_lite::future::block_on(common::within("a turn", pump.turn())).expect("a turn");
    set_flag.store(true, SeqCst);
    check_gate.armed.store(true, SeqCst);
    let (_turn_woken, turn_waker) = counting();
    let mut turn = Box::pin(pump.turn());
    assert!(poll(turn.as_mut(), &turn_waker).is_pending());
    check.entered(); // the turn's run checks W1, holding the lock
    let (w2_woken, w2_waker) = counting();
    let mut w2 = {
        let flag = flag.clone();
        Box::pin(pump.wait_until(move || flag.load(SeqCst)))
    };
    assert!(poll(w2.as_mut(), &w2_waker).is_pending()); // left to the run's guard
    drop_gate.armed.store(true, SeqCst);
    check.go();
    dropping.entered(); // the run let go, and drops W1's entry: everything else is done
    let turned = poll(turn.as_mut(), &turn_waker);
    let w2_when_polled = w2_woken.0.load(SeqCst);
    dropping.go();
    until("W2's wake", || w2_woken.0.load(SeqCst) == 1);
    if turned.is_pending() {
        until("the turn", || poll(turn.as_mut(), &turn_waker).is_ready());
    }
    pump.close();
    assert_eq!(w1_woken.0.load(SeqCst), 1);
    // Its run's count ended before the entry's drop: the turn is done, and so is W2.
    assert!(matches!(turned, Poll::Ready(Ok(()))), "{turned:?}");
    assert_eq!(
        w2_when_polled, 1,
        "turn returned Ok while a wait whose condition held at its run's end was not woken"
    );
}
