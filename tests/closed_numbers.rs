//! A number the library closed while watched stays closed for the library: the set's own
//! descriptors never take it. One test in its own binary, so that no other test opens a
//! descriptor that takes the freed number meanwhile.
#![cfg(any(target_os = "linux", target_os = "android"))]

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use ffi_pump::{Descriptors, Interest};

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
    let set = Descriptors::new().expect("set");
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
