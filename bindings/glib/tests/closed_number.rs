//! A watch on a descriptor the caller closed while watched is told `G_IO_NVAL`, as under GLib's
//! own loop. One test in its own binary, so that no other test opens a descriptor that takes
//! the freed number meanwhile.

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use ffi_pump_glib::Sources;
use glib::IOCondition;

/// Found by a hostile probe (10 of 10 runs): the next iteration listed the closed number again,
/// the set moved to a new inner instance, which took the number, and GLib's `g_poll` of it
/// found the pump's epoll instance: the watch never fired (or fired with `G_IO_IN` when the
/// context's wake-up was ready).
#[test]
fn a_watch_on_a_descriptor_closed_while_watched_is_told_nval() {
    let sources = Sources::new().expect("pump thread");
    smol::block_on(async {
        // The runtime's own descriptors are made before the number is freed.
        let warmed = sources.after(Duration::from_millis(1));
        warmed
            .timeout(Duration::from_secs(10))
            .await
            .expect("fired");
        let (watched, _peer) = UnixStream::pair().expect("pair");
        let fd = watched.into_raw_fd();
        let watch = sources.readable(fd).timeout(Duration::from_secs(10));
        // Made, attached and queried: the set watches the number.
        for _ in 0..2 {
            sources.pump().turn().await.expect("turn");
        }
        // SAFETY: `fd` came from `into_raw_fd` and is closed once, here.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
        // Iterations for another reason: GLib polls the closed number.
        let another = sources.after(Duration::from_millis(2));
        another
            .timeout(Duration::from_secs(10))
            .await
            .expect("fired");
        let fired = watch.await.expect("the watch fired");
        assert!(
            fired.condition.contains(IOCondition::NVAL),
            "{:?}",
            fired.condition
        );
    });
}
