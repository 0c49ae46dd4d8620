//! Tcl through ffi-pump: an interpreter closed leaves no descriptor open. A file of its own, as
//! it counts the process's descriptors, which another test's would move.

use std::time::Duration;

use ffi_pump_tcl::{Schedule, Tcl};

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// One interpreter: one sleep, or one script, then closed and dropped.
fn one_interpreter(script: Option<&str>) {
    let tcl = Tcl::new(Schedule::Deadlines).expect("pump thread");
    smol::block_on(async {
        match script {
            Some(script) => assert!(matches!(tcl.eval(script).await, Ok(Ok(_)))),
            None => {
                let fired = tcl.sleep(Duration::from_millis(2), Duration::from_secs(5));
                assert!(fired.await.is_ok());
            }
        }
        tcl.pump().close();
        tcl.pump().closed().await.expect("closed");
    });
    drop(tcl);
    // Not a wait for anything: interpreters made at a human pace, as the race below needs (back
    // to back, the next thread's start hid it).
    std::thread::sleep(Duration::from_millis(20));
}

/// Found by a hostile probe: Tcl 8.6 stopped its notifier thread whenever the last thread using
/// the notifier finalized (each interpreter's, here), and lost the race in
/// `Tcl_FinalizeNotifier` that closes its trigger pipe's write end more often than not: 12 – 57
/// descriptors left open by 60 interpreters.
#[test]
fn an_interpreter_closed_leaves_no_descriptor_open() {
    for script in [None, Some("update")] {
        (0..3).for_each(|_| one_interpreter(script)); // Tcl's own for the process, first
        let before = open_descriptors();
        (0..30).for_each(|_| one_interpreter(script));
        let after = open_descriptors();
        assert!(
            after <= before + 2,
            "{before} descriptors open before 30 interpreters ({script:?}), {after} after"
        );
    }
}
