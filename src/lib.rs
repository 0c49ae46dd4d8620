//! Drive a C library's non-reentrant event loop from many async tasks: once per round, never
//! concurrently, never re-entrantly, and not at all while nobody waits and none of its
//! descriptors is ready. Binding a library: the [`guide`].
//!
//! ```
//! use ffi_pump::Pump;
//! use std::time::Duration;
//! # mod ffi {
//! #     use std::sync::atomic::{AtomicU32, Ordering};
//! #     static RUNS: AtomicU32 = AtomicU32::new(0);
//! #     pub unsafe fn run_event_loop_once() { RUNS.fetch_add(1, Ordering::SeqCst); }
//! #     pub unsafe fn check_status_for_id(id: u32) -> bool { RUNS.load(Ordering::SeqCst) > id }
//! # }
//!
//! # futures_lite::future::block_on(async {
//! let pump = Pump::builder()
//!     .interval(Duration::from_millis(1))
//!     // SAFETY (for a real binding): the pump never calls this concurrently or re-entrantly.
//!     .build(|| unsafe { ffi::run_event_loop_once() })?;
//! pump.spawn(); // a detached task on the backend the cargo features select
//!
//! // In any task, on any executor:
//! let id = 2;
//! pump.wait_until(move || unsafe { ffi::check_status_for_id(id) })
//!     .timeout(Duration::from_secs(2))
//!     .await?;
//! # Ok::<(), ffi_pump::Error>(())
//! # }).unwrap();
//! ```
//!
//! # The problem
//!
//! A C library (libcurl's multi interface, libusb, GLib, c-ares, Tcl, …) only changes the status
//! of its objects inside its `run_once()` call, which is not re-entrant and usually not
//! thread-safe. A future that calls `run_once()` from its own `poll` runs the loop once per
//! waiting future per round, concurrently on a multi-threaded executor: wasted CPU and undefined
//! behaviour in C.
//!
//! # How the pump works
//!
//! - One [`async_lock::Mutex`] guards the C library: holding it is the right to call into C.
//! - The pump future ([`Pump::run`], or [`Pump::spawn`] to spawn it for you) ticks an
//!   [`async_io::Timer`]. Each tick `try_lock`s the loop: the holder calls `run_once()`, bumps
//!   the round counter and broadcasts "loop ran" on an [`event_listener::Event`]. A tick that
//!   finds a run in progress waits for its end instead of running the loop again; a
//!   [`Pump::turn`] returns only after a run that started after it was called.
//! - A wait ([`Pump::wait_until`], [`Pump::wait_for`]) hands its check to the pump, which runs
//!   every registered check right after each run, under the same lock, and wakes only the waits
//!   whose check succeeded ([`Strategy::PumpEvaluated`], the default). With
//!   [`Strategy::Broadcast`] each wait instead listens *before* it checks, so no run can slip
//!   between its check and its sleep, and checks itself under the lock after every run. Either
//!   way a check never overlaps a run.
//! - Libraries that report what finished complete keys in a [`Completions`] table from
//!   `run_once`; [`Pump::wait_key`] wakes on exactly its key, with no per-wait check at all.
//! - Besides its timer, the pump turns on [`Pump::kick`], on readiness of the library's
//!   descriptor ([`Builder::run_on_readable`]: any descriptor on Unix, a [`Descriptors`] set on
//!   Windows; on tokio, `Builder::tokio_readiness` lets tokio's reactor watch it) and at the
//!   deadlines `run_once` reports
//!   (`run_once` returns them: [`Builder::build`], [`Next`]).
//! - No wait pending: the timers stop (see "Idle" below). The first wait restarts them.
//! - [`Pump::close`], dropping the last [`Pump`], or dropping the driver ends every wait with
//!   [`Error::Closed`] (or with what its check found in a pass under way at the close); a panic
//!   in `run_once` ends them with [`Error::Panicked`]. Nothing hangs.
//!
//! # Idle
//!
//! One rule, for every way a pump is built: **while no wait is pending, the pump makes no run
//! for a tick or for the loop's own deadline; whatever the library itself asks for still runs
//! it** — readiness of its descriptor or [descriptor set](Descriptors) (data it queued with
//! nobody waiting goes out, a hang-up is seen), a [`Pump::kick`], a [`LoopHandle`] call or post,
//! a [`Pump::turn`]. Idle, the pump costs nothing unless the library's descriptors are ready.
//! [`Builder::idle_stop`]`(false)` keeps the timers running too, for a library whose timers
//! must fire with nobody waiting.
//!
//! # Re-entrancy
//!
//! From inside a pump — its `run_once`, one of its checks, a call on its loop's thread, the drop
//! of its loop — every call that would wait for that pump ([`Pump::turn`], the waits,
//! [`LoopHandle::call`], [`Pump::closed`], a [`Subscription`] with nothing to hand) fails with
//! [`Error::Reentrant`] instead of waiting for itself, however deeply pumps nest on one thread
//! (A's `run_once` turning B, whose `run_once` calls A), and wherever the future was made or
//! first polled. Loops on their own threads are threads like any others: if A's loop thread
//! blocks on B (a call, a turn, a wait) while B's blocks on A, both wait for ever, as two
//! threads that each wait for the other do — nothing tells the crate that the call B's thread
//! makes is made for A, nor whether a future polled inside A is blocked on or kept for later.
//! Between loops that may wait for each other, post or kick one way.
//! [`Pump::kick`], [`Pump::close`], [`LoopHandle::post`] and [`Completions::complete`] never
//! wait, and work there.
//!
//! # Panics in user code
//!
//! No panic in a closure the crate takes aborts the process, and none lands in a task that
//! merely happened to drop something last. Each row names the test that holds it to this.
//!
//! | user code that panics | the wait(s) | the pump | test |
//! |---|---|---|---|
//! | `run_once` | every wait ends with [`Error::Panicked`] | closes, [`Stats::panicked`] | `lifecycle.rs :: panic_in_run_once_fails_every_wait_with_panicked`, `completions.rs :: a_panic_in_run_once_ends_key_waits_with_panicked` |
//! | a check, [`Strategy::PumpEvaluated`] | the panic resumes in that wait's task | goes on | `strategies.rs :: a_panicking_check_fails_its_own_wait_only` |
//! | a check, [`Strategy::Broadcast`] | the panic resumes in that wait's task (it ran there) | goes on | `promises.rs :: issue_21_a_panicking_broadcast_check_fails_its_own_wait_only` |
//! | a [`LoopHandle::call`] closure | the panic resumes in the task awaiting the call | goes on | `loop_handle.rs :: a_panicking_call_fails_only_itself` |
//! | a [`LoopHandle::post`] closure | none: caught on the loop's thread | goes on | `loop_handle.rs :: a_panicking_call_fails_only_itself` |
//! | [`LoopHandle::request`]'s or [`LoopHandle::submit`]'s `start` | caught on the loop's thread, resumed in the task awaiting it (a submit's wait gives up as it unwinds, so its `cancel` runs for what `start` began) | goes on | `requests.rs :: a_panic_in_start_reaches_the_awaiting_task_and_the_pump_goes_on`, `a_panic_in_a_submits_start_reaches_the_awaiting_task` |
//! | [`LoopHandle::submit`]'s `cancel`, [`WaitKey::on_cancel`] | none (the wait had ended); its key is free again | goes on | `promises.rs :: issue_21_a_panicking_cancel_frees_its_key` |
//! | the factory of a loop on its thread | no pump is made: [`Builder::build_with_state`] returns [`Error::Panicked`] (an `Err` from the factory: [`Error::Factory`]) | never opens | `promises.rs :: issue_21_the_build_ends_with_panicked_when_the_factory_panics`, `binding_api.rs :: a_factory_panic_ends_the_build_with_panicked_within_10_s` |
//! | `Drop` of the loop's state | none (they ended at the close) | [`Stats::panicked`]; [`Pump::closed`] returns | `promises.rs :: issue_21_a_panicking_drop_of_the_state_is_reported` |
//! | `Drop` of what `run_once` captured | end with [`Error::Closed`] as at any close | caught wherever the last reference goes (on smol this aborted); after a close, [`Stats::panicked`] only | `promises.rs :: issue_21_a_panicking_drop_of_run_once_never_aborts`, `waits_end_with_closed_when_run_onces_drop_panics_after_a_close` |
//! | `Drop` of what a check, a call or a post captured (also on a closed pump, a broadcast or local check, a wait never polled) | unaffected | caught; goes on | `promises.rs :: issue_21_panicking_drops_of_checks_and_calls_stay_in_the_pump`, `a_panicking_drop_of_a_closure_on_a_closed_pump_or_in_a_wait_stays_out_of_the_caller` |
//! | `Drop` of a value nobody takes: a request's answer after its wait gave up (in `run_once` or on a library's thread), a call's answer whose [`Call`] was dropped unpolled, a check's value for a wait dropped unpolled | unaffected | caught where it is dropped; goes on | `promises.rs :: a_value_answering_a_request_that_gave_up_is_dropped_with_its_panic_caught`, `a_value_answering_a_request_whose_cancel_ran_does_not_end_the_pump`, `an_answered_call_dropped_unpolled_drops_its_value_with_its_panic_caught`, `a_value_a_check_found_for_a_wait_dropped_unpolled_is_dropped_with_its_panic_caught` |
//!
//! Wakers are the executor's code, not the crate's: the pump wakes tasks through
//! `event-listener`, which calls a waker with its list locked. A waker that panics kills the
//! thread that woke it (the driver: the pump closes), and one that drops its own task inside
//! `wake` (an executor on `async-task` whose schedule function drops the `Runnable`, once it has
//! shut down) deadlocks that thread if the task held a listener of the same event: the driver, a
//! [`Pump::turn`], [`Pump::closed`], a [`Strategy::Broadcast`] wait. The wakers of smol,
//! async-std and tokio reschedule their task and return.
//!
//! # Backends
//!
//! The pump future only needs `async-io`'s timer, which drives itself, so it runs on any
//! executor. The cargo features `smol` (default), `async-std` and `tokio` add spawn glue; they are
//! additive, and [`Backend::detect`] documents which one [`Pump::spawn`] picks. With no runtime at
//! all, two kinds of thread, named apart everywhere (thread names, the `tracing` span):
//! [`Backend::Thread`] spawns **a thread that drives the pump future** ("ffi-pump-driver",
//! span `thread`); [`Builder::build_with_state`] puts **the
//! loop on its own thread** ("ffi-pump-loop", span `loop-thread`), which also keeps a `!Send` C
//! handle on the one thread that owns it. Both get an 8 MiB stack, as a C program's main thread
//! has on Linux: C libraries are written for it (std's threads get 2 MiB).
//!
//! # Where the loop lives × what wakes it
//!
//! Two choices, each made once. Where the loop lives is the constructor; what wakes it is what
//! `run_once` returns ([`Next`]). Every cell also runs on [`Pump::kick`], [`Pump::turn`],
//! [`LoopHandle`] calls and readiness of the library's descriptors, and makes no run for ticks
//! or deadlines while no wait is pending.
//!
//! | | `()`: ticks | `Option<Instant>`: its own deadline | [`Next`]: either, run by run |
//! |---|---|---|---|
//! | **in the pump**: [`Builder::build`], spawned on any executor | a run per interval while anyone waits | a run at each deadline, none while nothing is due; refuses an interval | as it says |
//! | **on its own thread**, with state: [`Builder::build_with_state`]; `run_once` is told each [`Run`]'s cause, whether its deadline came and what is ready | the same, on that thread | the same, on that thread; calls kick it | as it says |
//!
//! The descriptor set ([`Descriptors`]) is there wherever the loop lives: on its own thread from
//! [`Setup::descriptors`], in the pump as `Descriptors::new()` given to
//! [`Builder::run_on_readable`], on every platform. Either way every cell above also runs whenever a
//! registration in the set is ready. A loop on its own thread may also keep a library's many
//! timeouts in the pump ([`Setup::timeouts`], [`Timeouts`]): the first one is its deadline too
//! (a ticking loop looks at them at its ticks).
//!
//! What each costs: a loop in the pump runs on whichever executor thread drives the pump (no
//! thread of its own, but `run_once` must not block); a loop on its own thread costs that thread
//! and a hand-off per call, and keeps `!Send` state. Ticks cost a run per interval while anyone
//! waits, whether or not anything changed; deadlines and readiness cost a run only when the
//! library has work. The repository's `BENCHMARKS.md` measures each.
//!
//! # Thread-affine libraries
//!
//! [`Builder::build_with_state`] makes a loop's state (a curl multi handle, a Tcl interpreter, a
//! uv loop) on the loop's own thread, with a factory that may fail (its error comes back from
//! the constructor), and returns a [`LoopHandle`] to it: [`LoopHandle::call`] runs a closure
//! there between runs and returns its value, [`LoopHandle::request`] starts work there and waits
//! for its one result with no id of the binding's own ([`LoopHandle::submit`] for results keyed
//! in a [`Completions`] table, [`LoopHandle::subscribe`] for a stream of them), each with a
//! cleanup that runs there if the caller gives up. `run_once` says when the loop next needs to
//! run, [`Run`] tells it why it runs, and [`Pump::closed`] waits until the state was dropped on
//! its thread.
//!
//! # Event-driven libraries
//!
//! A library that asks its loop to watch descriptors (libcurl's socket callback, D-Bus watches,
//! GLib's `GPollFD`s, libusb's pollfds) keeps the pump's [`Descriptors`] set (from
//! [`Setup::descriptors`], on every platform) in its state and in its callbacks — a clone each, every method
//! `&self`. It registers descriptors by number under tokens of its choosing, for reading,
//! writing, both or nothing, several per descriptor, changes and drops them (from `run_once`,
//! where such callbacks fire, or from a call), and each run reads what is ready in
//! [`Run::ready`]. Watching a raw number takes no `unsafe` in the binding: the set carries that
//! obligation (see "The library's part" on [`Descriptors`]). The pump waits on the
//! whole set as one registration with the runtime's reactor, on the loop's deadline, on kicks and
//! on calls, and nothing else: no interval. The repository's curl binding runs libcurl this way
//! (`curl_multi_socket_action`), its GLib binding runs prepare, query, check and dispatch.
//!
//! # Tracing
//!
//! With the cargo feature `tracing` (off by default) every pump has a span, `ffi_pump::pump`,
//! with its [name](Builder::name) and the backend last set to drive it, and reports to it: a
//! `TRACE` event per round (its number, what caused it — `tick`, `kick`, `readiness`, `deadline`
//! or `turn` —, the time spent in `run_once` and in the checks, what it woke), `DEBUG`
//! events for late and skipped ticks and for a close, `ERROR` when `run_once` panicked and
//! `WARN` when the readiness trigger failed. Without the feature none of this is compiled in.
//!
//! # Platforms
//!
//! Everything works on every platform async-io supports (Unix and Windows). The readiness
//! trigger ([`Builder::run_on_readable`]) takes any descriptor on Unix, a [`Descriptors`] set on
//! Windows. The set is epoll on Linux and Android, smol-rs `polling` in level mode elsewhere
//! (kqueue on macOS and the BSDs, event ports on illumos), and on Windows sockets on an I/O
//! completion port, which a loop's own thread sleeps on, or a thread of the pump's for a set
//! given to `run_on_readable` (see [`Descriptors`], "Platforms"). The crate's CI runs its tests
//! on Linux (the set's also on its `polling` form), and on Windows under wine (those that need no
//! Unix descriptor, the set's socket tests and the curl binding's included), and checks it with
//! clippy for macOS and FreeBSD.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;
mod builder;
mod calls;
mod closed;
mod completions;
mod core;
mod driver;
mod error;
pub mod guide;
mod kept;
mod kicker;
mod loop_handle;
mod next;
mod pump;
mod reactor;
mod reentry;
mod registry;
mod request;
mod run;
mod setup;
mod stats;
mod strategy;
mod subscription;
mod sync;
mod timeouts;
mod trace;
mod trigger;
mod turn;
mod unwind;
mod wait;

pub use backend::Backend;
pub use builder::Builder;
pub use closed::Closed;
pub use completions::Completions;
pub use driver::{Cause, Driver};
pub use error::Error;
pub use kicker::Kicker;
pub use loop_handle::{Call, LoopHandle};
pub use next::{IntoNext, Next};
pub use pump::Pump;
pub use request::{Completer, Request, RequestId};
pub use run::Run;
pub use setup::{FactoryError, Setup};
pub use stats::Stats;
pub use strategy::Strategy;
pub use subscription::{Emitter, Subscription};
pub use timeouts::{Expired, Timeouts};
pub use trigger::{Descriptors, Interest, RawDescriptor, Ready};
pub use turn::Turn;
pub use wait::{WaitFor, WaitKey, WaitUntil};

#[allow(dead_code)]
fn __test_send_and_sync() {
    fn _assert_send<T: Send>() {}
    fn _assert_sync<T: Sync>() {}
    fn _assert_static<T: 'static>() {}
    _assert_send::<Pump>();
    _assert_sync::<Pump>();
    _assert_send::<Driver>();
    _assert_static::<Driver>();
    _assert_send::<Turn>();
    _assert_send::<WaitUntil<fn() -> bool>>();
    _assert_send::<WaitFor<fn() -> Option<u8>, u8>>();
    _assert_static::<WaitUntil<fn() -> bool>>();
    _assert_send::<WaitKey<u32, u8>>();
    _assert_send::<Completions<u32, u8>>();
    _assert_sync::<Completions<u32, u8>>();
    _assert_send::<Closed>();
    _assert_send::<LoopHandle<std::rc::Rc<u8>>>();
    _assert_sync::<LoopHandle<std::rc::Rc<u8>>>();
    _assert_send::<Call<u8>>();
    _assert_send::<Kicker>();
    _assert_sync::<Kicker>();
    _assert_send::<Request<u8>>();
    _assert_send::<Completer<u8>>();
    _assert_send::<Subscription<u8>>();
    _assert_send::<Emitter<u8>>();
    _assert_send::<Error>();
    _assert_sync::<Error>();
}
