//! A number the library closed while watched stays closed for the library: the set's own
//! descriptors never take it. In a binary of its own, so that no other test opens a descriptor
//! that takes the freed number meanwhile.
#![cfg(any(target_os = "linux", target_os = "android"))]

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use ffi_pump::{Descriptors, Interest};

/// The tests free numbers and look at them: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What the number names now, if anything.
fn names(fd: RawFd) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()
}

/// Closes a number given up by `into_raw_fd`.
fn close(fd: RawFd) {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` came from `into_raw_fd` and is closed once, here.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
}

/// Found by a hostile probe of the GLib binding: a library that lists a number it closed (as
/// GLib's query lists what its sources hold) made the set move to a new inner instance, which
/// took that number, the lowest free one; the library's own `poll()` of it then found the
/// set's epoll instance (ready whenever a registration was), not `POLLNVAL`.
#[test]
fn a_new_inner_instance_never_takes_a_number_the_library_closed() {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let set = Descriptors::new().expect("set");
    // A number the kernel refuses (none is open so far up) counts for nothing (review: it put
    // every new instance out of reach, and the bug came back).
    assert!(set.watch(1 << 30, Interest::READABLE, 99).is_err());
    let (kept, mut peer) = UnixStream::pair().expect("pair");
    let (closed, _other) = UnixStream::pair().expect("pair");
    let closed = closed.into_raw_fd();
    set.watch_only([
        (kept.as_raw_fd(), Interest::READABLE),
        (closed, Interest::READABLE),
    ])
    .expect("both watched");
    close(closed);
    assert_eq!(names(closed), None, "the number is free");
    // The library lists it again: refused, and the set moves to a new inner instance.
    let listed_again = set.watch_only([
        (kept.as_raw_fd(), Interest::READABLE),
        (closed, Interest::READABLE),
    ]);
    assert!(listed_again.is_err(), "a closed number is refused");
    assert_eq!(
        names(closed),
        None,
        "the set's new instance took the closed number"
    );
    // The set still works after the move.
    std::io::Write::write_all(&mut peer, b"x").expect("write");
    let ready: Vec<RawFd> = set.ready().iter().map(|ready| ready.fd()).collect();
    assert_eq!(ready, [kept.as_raw_fd()]);
}

/// The number of the epoll instance that watches `fd` (the set's inner one), from its
/// `/proc/self/fdinfo` (`tfd:` lines).
fn instance_watching(fd: RawFd) -> Option<RawFd> {
    let watches = |info: &str| {
        info.lines()
            .filter_map(|line| line.strip_prefix("tfd:"))
            .any(|rest| rest.split_whitespace().next() == Some(&fd.to_string()))
    };
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path())
                .is_ok_and(|target| target.as_os_str() == "anon_inode:[eventpoll]")
        })
        .filter_map(|entry| entry.file_name().to_str()?.parse::<RawFd>().ok())
        .find(|&number| {
            std::fs::read_to_string(format!("/proc/self/fdinfo/{number}"))
                .is_ok_and(|info| watches(&info))
        })
}

/// With no room above the library's numbers, the set still moves, under the kernel's numbers
/// (review, on `polling`'s form: it held every free number up to the highest, found none left
/// for the new poller, and never moved; each report tried again).
#[test]
fn with_no_room_above_the_librarys_numbers_the_set_still_moves() {
    use rustix::process::{getrlimit, Resource};
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let limit = getrlimit(Resource::Nofile).current.expect("a limit");
    let limit = RawFd::try_from(limit).unwrap_or(RawFd::MAX);
    let set = Descriptors::new().expect("set");
    let (kept, mut peer) = UnixStream::pair().expect("pair");
    let Ok(top) = rustix::io::fcntl_dupfd_cloexec(&kept, limit - 2) else {
        return; // another test holds the numbers up there
    };
    let (closed, _other) = UnixStream::pair().expect("pair");
    let closed = closed.into_raw_fd();
    let list = |closed: RawFd| {
        set.watch_only([
            (top.as_raw_fd(), Interest::READABLE),
            (closed, Interest::READABLE),
        ])
    };
    list(closed).expect("both watched");
    let before = instance_watching(top.as_raw_fd());
    assert!(before.is_some(), "an instance watches it");
    close(closed);
    assert!(list(closed).is_err(), "a closed number is refused");
    let after = instance_watching(top.as_raw_fd());
    assert!(after.is_some() && after != before, "the set did not move");
    std::io::Write::write_all(&mut peer, b"x").expect("write");
    let ready: Vec<RawFd> = set.ready().iter().map(|ready| ready.fd()).collect();
    assert_eq!(ready, [top.as_raw_fd()]);
}
