//! Tcl through ffi-pump: an interpreter closed leaves nothing behind. A file of its own, so no
//! other test's memory moves the process's resident size meanwhile.

use ffi_pump_tcl::{Schedule, Tcl};

/// Resident memory of this process, in KiB (`/proc/self/status`).
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    line.split_whitespace()
        .nth(1)
        .expect("a number")
        .parse()
        .expect("KiB")
}

/// Found by a hostile probe: each interpreter left its thread's Tcl data behind (~128 KiB:
/// 641 MB after 5 000), as nothing finalized the pump thread's Tcl state.
#[test]
fn an_interpreter_closed_leaves_nothing_behind() {
    let cycle = || {
        let tcl = Tcl::new(Schedule::Deadlines).expect("pump thread");
        smol::block_on(async {
            assert_eq!(tcl.eval("set x 1").await, Ok(Ok("1".to_string())));
            tcl.pump().close();
            tcl.pump().closed().await.expect("closed");
        });
    };
    (0..20).for_each(|_| cycle()); // what stays for good (Tcl's process-wide state) comes first
    let before = resident_kib();
    (0..200).for_each(|_| cycle());
    let grown = resident_kib().saturating_sub(before);
    assert!(grown < 8 * 1024, "{grown} KiB more after 200 interpreters");
}
