//! Where the system has no descriptor or thread to give: at async-io's first use, a runtime's
//! first threads, a trigger's look-up entry, a set's move. Limits are process-wide, and a first
//! use happens once per process: each test runs its body alone in a child process (this binary
//! run again on that one test), with its output in a file.
#![cfg(all(
    target_os = "linux",
    feature = "smol",
    feature = "async-std",
    feature = "tokio"
))]

mod common;

use std::fs::File;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump::{Backend, Error, Pump};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Set in the child: run the body, not the child.
const CHILD: &str = "FFI_PUMP_EXHAUSTED_CHILD";

/// Runs test `name` alone in a child process; its output on failure. Killed after 60 s (a
/// hang is a failure too).
fn in_child(name: &str) -> Result<(), String> {
    let log = std::env::temp_dir().join(format!("ffi-pump-{name}-{}.log", std::process::id()));
    let out = File::create(&log).expect("a log file");
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdout(Stdio::from(out.try_clone().expect("the log again")))
        .stderr(Stdio::from(out))
        .spawn()
        .expect("the child starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    match status {
        Some(status) if status.success() && text.contains("1 passed") => Ok(()),
        Some(status) => Err(format!("child ended with {status}:\n{text}")),
        None => Err(format!("child hung, killed after 60 s:\n{text}")),
    }
}

/// In the child, runs the body; in the parent, the child.
macro_rules! alone {
    ($(#[doc = $doc:literal])* fn $name:ident() $body:block) => {
        $(#[doc = $doc])*
        #[test]
        fn $name() {
            if std::env::var_os(CHILD).is_some() {
                $body
            } else if let Err(failed) = in_child(stringify!($name)) {
                panic!("{failed}");
            }
        }
    };
}

/// Lowers the limit of open descriptors to a few above the highest open, and takes every number
/// left; dropping it gives them back and restores the limit.
struct NoDescriptorFree {
    taken: Vec<File>,
    saved: Rlimit,
}

impl NoDescriptorFree {
    fn now() -> NoDescriptorFree {
        let highest = u64::try_from(common::highest_open_fd()).expect("not negative");
        let saved = getrlimit(Resource::Nofile);
        let lowered = Rlimit {
            current: Some(highest + 1 + 16),
            maximum: saved.maximum,
        };
        setrlimit(Resource::Nofile, lowered).expect("the limit lowers");
        let mut taken = Vec::new();
        while let Ok(file) = File::open("/dev/null") {
            taken.push(file);
        }
        assert!(
            File::open("/dev/null").is_err(),
            "a descriptor is still free"
        );
        NoDescriptorFree { taken, saved }
    }
}

impl Drop for NoDescriptorFree {
    fn drop(&mut self) {
        self.taken.clear();
        setrlimit(Resource::Nofile, self.saved).expect("the limit comes back");
    }
}

alone! {
    /// Found by a hostile probe: with no descriptor free at async-io's first use, its reactor
    /// panicked on the pump's thread; `build_with_state` and `spawn_on` had said `Ok`, and the
    /// pump closed with no reason (`Closed`, `panicked: false`); smol's executor thread panicked
    /// again and again (~12 700 times a second). Each is refused now, leaving the pump open; a
    /// `spawn()`, which returns no error, fails the pump with the reason.
    fn async_ios_first_use_with_no_descriptor_free_is_refused_with_why() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let full = NoDescriptorFree::now();
        let built = Pump::builder().build_with_state(|_| Ok(()), |_, _| None);
        assert!(built.is_err(), "a loop on its thread said Ok: {:?}", built.map(|_| ()));
        let pump = Pump::builder()
            .interval(Duration::from_millis(1))
            .build(|| {})
            .expect("a pump in the pump needs no descriptor");
        for backend in [Backend::Thread, Backend::Smol, Backend::AsyncStd] {
            let spawned = pump.spawn_on(backend);
            assert_eq!(spawned, Err(Error::ReactorUnavailable), "{backend:?}");
        }
        let spawned = {
            let _entered = rt.enter();
            pump.spawn_on(Backend::Tokio)
        };
        assert_eq!(spawned, Err(Error::ReactorUnavailable), "tokio");
        assert!(!pump.is_closed(), "a refused spawn leaves the pump open");
        let unchecked = Pump::builder().build(|| {}).expect("a pump");
        unchecked.spawn();
        let waited = futures_lite::future::block_on(unchecked.wait_until(|| true));
        assert_eq!(waited, Err(Error::ReactorUnavailable), "spawn() fails the pump with why");
        drop(full);
        // Descriptors free again: a pump on tokio, which never drives async-io's reactor itself,
        // has its timers (review: async-io's helper thread had died in the refused first use,
        // and no tick ever came). Looked at without async-io, whose timers are what is tested.
        let runs = Arc::new(AtomicU64::new(0));
        let counted = runs.clone();
        let ticking = Pump::builder()
            .interval(Duration::from_millis(5))
            .idle_stop(false)
            .build(move || {
                counted.fetch_add(1, SeqCst);
            })
            .expect("a pump");
        {
            let _entered = rt.enter();
            ticking.spawn_on(Backend::Tokio).expect("spawned now");
        }
        let started = Instant::now();
        while runs.load(SeqCst) < 3 {
            assert!(started.elapsed() < Duration::from_secs(10), "no tick on tokio");
            std::thread::sleep(Duration::from_millis(5));
        }
        // The same pump as before is driven, and a loop on its thread starts.
        pump.spawn_on(Backend::Thread).expect("spawned now");
        assert_eq!(async_io::block_on(pump.turn()), Ok(()));
        let (_pump, handle) = Pump::builder()
            .build_with_state(|_| Ok(5), |_, _| None)
            .expect("built now");
        assert_eq!(async_io::block_on(handle.call(|five| *five)), Ok(5));
    }
}

/// Caps the address space a little above what is mapped now, so no thread's stack fits;
/// dropping it restores the limit.
struct NoThreadFits(Rlimit);

impl NoThreadFits {
    fn now() -> NoThreadFits {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let mapped_kb = (status.lines())
            .find_map(|line| line.strip_prefix("VmSize:"))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .expect("VmSize");
        let saved = getrlimit(Resource::As);
        let capped = Rlimit {
            current: Some(mapped_kb * 1024 + 512 * 1024),
            maximum: saved.maximum,
        };
        setrlimit(Resource::As, capped).expect("the address space caps");
        NoThreadFits(saved)
    }
}

impl Drop for NoThreadFits {
    fn drop(&mut self) {
        setrlimit(Resource::As, self.0).expect("the limit comes back");
    }
}

alone! {
    /// Found by a hostile probe: with the system refusing threads before smol's or async-std's
    /// executor had started, `spawn_on` panicked (the runtime's "cannot spawn executor
    /// thread"), where `Backend::Thread` says `ThreadSpawn`. Both say it now.
    fn a_runtime_whose_threads_the_system_refuses_is_a_spawn_error() {
        // async-io's reactor comes up first: the threads are what is refused.
        async_io::block_on(async_io::Timer::after(Duration::from_millis(1)));
        let pumps = [Pump::new(|| {}), Pump::new(|| {}), Pump::new(|| {})];
        let capped = NoThreadFits::now();
        assert!(std::thread::Builder::new().spawn(|| ()).is_err(), "threads still start");
        let spawned: Vec<_> = [Backend::Smol, Backend::AsyncStd, Backend::Thread]
            .into_iter()
            .zip(&pumps)
            .map(|(backend, pump)| (backend, pump.spawn_on(backend)))
            .collect();
        drop(capped);
        for (backend, spawned) in spawned {
            assert!(matches!(spawned, Err(Error::ThreadSpawn(_))), "{backend:?}: {spawned:?}");
        }
        assert!(pumps.iter().all(Pump::is_closed), "each driver went with its refusal");
    }
}

alone! {
    /// Found by a hostile probe: `run_on_readable` on a pipe (not a socket: a new file under its
    /// number may share its inode) with one descriptor free took it for the pump's duplicate,
    /// and the kernel entry that tells a new file under the number failed in silence; the
    /// library then replaced its descriptor under the same number, unnoticed, and the pump ran
    /// 27 000 – 330 000 times a second on the old one. The build is refused now (also once
    /// numbers are free again: the builder was told at the limit), as with no number for the
    /// duplicate.
    fn a_pipe_given_with_one_descriptor_free_is_refused() {
        async_io::block_on(async_io::Timer::after(Duration::from_millis(1)));
        let (reader, _writer) = rustix::pipe::pipe().expect("a pipe");
        let mut full = NoDescriptorFree::now();
        full.taken.pop(); // one number free: the duplicate's
        let told = Pump::builder().run_on_readable(&reader);
        drop(full);
        let built = told.build(|| {});
        assert!(
            matches!(built, Err(Error::Trigger(_))),
            "{:?}",
            built.map(|_| ())
        );
        let built = Pump::builder().run_on_readable(&reader).build(|| {});
        assert!(built.is_ok(), "with numbers to spare: {:?}", built.map(|_| ()));
    }
}

alone! {
    /// Found by a hostile probe: a library closed a watched pipe without unwatching it, a
    /// duplicate kept the file open, and data came with no descriptor free: the set could not
    /// make the new inner instance that leaves the leftover report behind, and the pump ran
    /// 10 000 - 150 000 times a second, with nothing handed, until a number was free (a loop
    /// on its thread, and a pump given the set). The move takes an instance made ahead now.
    fn a_set_that_must_move_with_no_descriptor_free_does_not_spin() {
        use std::os::fd::AsRawFd;
        use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
        use std::sync::Arc;
        async_io::block_on(async_io::Timer::after(Duration::from_millis(1)));
        for on_its_thread in [true, false] {
            let (reader, writer) = rustix::pipe::pipe().expect("a pipe");
            let elsewhere = rustix::io::dup(&reader).expect("a duplicate"); // a forked child's
            let number = reader.as_raw_fd();
            let runs = Arc::new(AtomicU64::new(0));
            let counted = runs.clone();
            let pump = if on_its_thread {
                let (pump, _handle) = Pump::builder()
                    .build_with_state(
                        move |setup| {
                            let set = setup.descriptors()?;
                            set.watch(number, ffi_pump::Interest::READABLE, 1)?;
                            Ok(set)
                        },
                        move |_, run| {
                            counted.fetch_add(1, SeqCst);
                            assert!(run.ready().is_empty(), "nothing is handed");
                            None
                        },
                    )
                    .expect("built");
                pump
            } else {
                let set = ffi_pump::Descriptors::new().expect("a set");
                set.watch(number, ffi_pump::Interest::READABLE, 1).expect("watched");
                let kept = set.clone();
                let pump = Pump::builder()
                    .run_on_readable(&set)
                    .build(move || {
                        counted.fetch_add(1, SeqCst);
                        assert!(kept.ready().is_empty(), "nothing is handed");
                        None
                    })
                    .expect("built");
                pump.spawn_on(Backend::Thread).expect("spawned");
                pump
            };
            async_io::block_on(pump.turn()).expect("open");
            drop(reader); // closed first, never unwatched
            let full = NoDescriptorFree::now();
            rustix::io::write(&writer, b"x").expect("written");
            let before = runs.load(SeqCst);
            std::thread::sleep(Duration::from_millis(500));
            let during = runs.load(SeqCst) - before;
            drop(full);
            assert!(
                during < 50,
                "on its thread {on_its_thread}: {during} runs in 500 ms with nothing handed"
            );
            assert_eq!(async_io::block_on(pump.turn()), Ok(()), "still turns");
            drop(elsewhere);
        }
    }
}

alone! {
    /// Found in review of the spare instance: made at the limit, right after a move, it took
    /// the only free number — one the library had closed while watched — and kept it; the
    /// library's own `poll()` of that number then found the set's instance, not `POLLNVAL`. A
    /// spare under the library's numbers is not kept now.
    fn a_spare_made_at_the_limit_takes_no_number_the_library_closed() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        use std::os::unix::net::UnixStream;
        // The library's number under the set's own (the lowest free once it closed it), and
        // one it keeps above them: no room above the library's numbers at the limit.
        let (library, mut peer) = UnixStream::pair().expect("a pair");
        let set = ffi_pump::Descriptors::new().expect("a set");
        let (kept, _kept_peer) = UnixStream::pair().expect("a pair");
        let elsewhere = rustix::io::dup(&library).expect("a duplicate"); // a forked child's
        let number = library.as_raw_fd();
        set.watch(number, ffi_pump::Interest::READABLE, 1).expect("watched");
        set.watch(kept.as_raw_fd(), ffi_pump::Interest::READABLE, 2).expect("watched");
        drop(library); // closed while watched
        let mut full = NoDescriptorFree::now();
        let at = (full.taken.iter()).position(|file| file.as_raw_fd() == number);
        drop(full.taken.remove(at.expect("the filler took the closed number")));
        peer.write_all(b"x").expect("written"); // the closed file's report lingers
        assert!(set.ready().is_empty(), "nothing of a closed number is handed");
        let names = std::fs::read_link(format!("/proc/self/fd/{number}")).ok();
        drop(full);
        assert_eq!(names, None, "the set's spare took the closed number");
        drop(elsewhere);
    }
}

alone! {
    /// Once a pump found async-io's reactor up, the check is one load: a pump spawned with no
    /// descriptor free later is driven (it needs none). (Review: before any pump did, the check
    /// asks for the descriptors the reactor needs, and refuses with none free even where the
    /// program brought async-io up itself — the price of never touching async-io without them.)
    fn a_pump_spawned_with_no_descriptor_free_after_a_pump_found_the_reactor_up_is_driven() {
        let first = Pump::builder().build(|| {}).expect("a pump");
        first.spawn_on(Backend::Thread).expect("the reactor comes up");
        let full = NoDescriptorFree::now();
        let pump = Pump::builder()
            .interval(Duration::from_millis(1))
            .build(|| {})
            .expect("a pump");
        let spawned = pump.spawn_on(Backend::Thread);
        let turned = futures_lite::future::block_on(pump.turn());
        drop(full);
        assert_eq!(spawned, Ok(()));
        assert_eq!(turned, Ok(()));
    }
}
