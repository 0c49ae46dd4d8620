//! A dropped descriptor set on Windows leaves no handle behind. The tests count the process's
//! handles, so they take turns, in a binary of their own.
#![cfg(windows)]
#![allow(unsafe_code)]

mod common;

use std::net::TcpStream;
use std::os::windows::io::AsRawSocket;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use common::tcp_pair;
use ffi_pump::{Descriptors, Interest, Pump};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[link(name = "kernel32")]
extern "system" {
    fn GetHandleInformation(handle: isize, flags: *mut u32) -> i32;
}

/// The process's open handles, each handle value asked for (wine's `GetProcessHandleCount`
/// says 0).
fn handles() -> usize {
    (4..=0x40000isize)
        .step_by(4)
        .filter(|&handle| {
            let mut flags = 0;
            // SAFETY: asks about a handle value, which needs not be open; writes `flags` only.
            unsafe { GetHandleInformation(handle, &mut flags) != 0 }
        })
        .count()
}

/// Runs `one` once to warm up (winsock, AFD), then `times` times more: the handles left after
/// those, allowing a few that come and go.
fn handles_left(times: usize, one: impl Fn()) -> (usize, usize) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    one();
    std::thread::sleep(Duration::from_millis(200));
    let before = handles();
    for _ in 0..times {
        one();
    }
    // Closing is not instant everywhere: a few looks.
    let started = Instant::now();
    let mut after = handles();
    while after > before + 4 && started.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
        after = handles();
    }
    (before, after)
}

/// Found by a hostile probe under wine (3 of 3): `polling` gives back a socket's poll (its AFD
/// handle) only when a wait takes its completion, and an unwatch only cancels it: each dropped
/// set kept one handle per socket it had watched.
#[test]
fn a_dropped_set_that_watched_a_socket_leaves_no_handle_behind() {
    let (before, after) = handles_left(100, || {
        let (socket, _peer) = tcp_pair();
        let set = Descriptors::new().expect("set");
        set.watch(socket.as_raw_socket(), Interest::READABLE, 1)
            .expect("watch");
        let _ = set.ready(); // the port's poll of the socket starts
        set.unwatch(1).expect("unwatch");
        // The library's part, in its order: unwatched, closed, then the set dropped.
        drop(socket);
        drop(set);
    });
    assert!(after <= before + 4, "100 sets: handles {before} -> {after}");
}

/// The same through a pump on its own thread whose state unwatches and closes its socket as it
/// drops, as curl's cleanup does (3 of 3 kept a handle each).
#[test]
fn a_closed_pump_whose_state_unwatched_its_socket_leaves_no_handle_behind() {
    struct State {
        set: Descriptors,
        socket: Option<TcpStream>,
    }
    impl Drop for State {
        fn drop(&mut self) {
            self.set.unwatch(1).expect("unwatch");
            drop(self.socket.take());
        }
    }
    let (before, after) = handles_left(100, || {
        let (socket, _peer) = tcp_pair();
        let (pump, _state) = Pump::builder()
            .build_with_state(
                move |setup| {
                    let set = setup.descriptors()?;
                    set.watch(socket.as_raw_socket(), Interest::READABLE, 1)?;
                    let socket = Some(socket);
                    Ok(State { set, socket })
                },
                |_: &mut State, _| None::<Instant>,
            )
            .expect("pump thread");
        futures_lite::future::block_on(async {
            pump.turn().await.expect("turn");
            pump.close();
            pump.closed().await.expect("closed");
        });
    });
    assert!(
        after <= before + 4,
        "100 pumps: handles {before} -> {after}"
    );
}
