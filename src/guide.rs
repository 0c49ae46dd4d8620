//! Binding a C event loop, in a few steps, for each shape a library comes in.
//!
//! Every binding answers three questions; the shapes below differ in the answers.
//!
//! 1. **Where does the loop live?** In the pump ([`Builder::build`]):
//!    `run_once` is `Send` and is called by whichever driver holds the loop lock. Or on a thread
//!    of its own with state `S` ([`Builder::build_with_state`]): the state need not be `Send`
//!    (curl's `Multi`, a Tcl interpreter), and a [`LoopHandle`] reaches it.
//! 2. **What wakes it?** The interval (a polled library), the deadline `run_once` returns (a
//!    library with its own timeouts), readiness of its descriptors (a library that asks its loop
//!    to watch them), kicks and calls.
//! 3. **How does a task learn its result?** A check ([`Pump::wait_until`]), a key completed
//!    from `run_once` ([`Completions`], [`Pump::wait_key`]), or a request whose [`Completer`]
//!    the library keeps ([`LoopHandle::request`]); many values: [`LoopHandle::subscribe`].
//!
//! Each example below runs as a doctest on the repository's C fixture (`fake-loop`, a handle-based
//! stand-in for a C library) or on a socket pair.
//!
//! # Polled: `run_once` and a status check
//!
//! The library only says "has object *id* finished?" (`curl_multi_perform` with
//! `curl_easy_getinfo`, a vendor SDK's `poll()` and `status(id)`). The pump ticks the loop at its
//! interval while anyone waits and runs each wait's check after every run, under the same lock.
//!
//! ```
//! use fake_loop::FakeLoop;
//! use ffi_pump::Pump;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! # futures_lite::future::block_on(async {
//! let library = Arc::new(FakeLoop::new(8)); // ffi::library_new()
//! library.arm_in(3, Duration::from_millis(10)); // object 3 finishes in 10 ms
//!
//! let runs = library.clone();
//! let pump = Pump::builder()
//!     .interval(Duration::from_millis(1))
//!     .build(move || runs.run_once().expect("the pump never re-enters the loop"))?;
//! pump.spawn();
//!
//! let status = library.clone();
//! pump.wait_until(move || status.check(3)).timeout(Duration::from_secs(2)).await?;
//! # Ok::<(), ffi_pump::Error>(())
//! # }).unwrap();
//! ```
//!
//! # Its own timeouts: `run_once` says when it is next due
//!
//! The library knows its next deadline (`curl_multi_timeout`, `uv_backend_timeout`, the timeout
//! of `g_main_context_query`). `run_once` returns it and the pump sleeps until then: no interval,
//! no run while nothing is due. Kick the pump after submitting work, so `run_once` can say the
//! new deadline.
//!
//! ```
//! use fake_loop::FakeLoop;
//! use ffi_pump::Pump;
//! use std::sync::Arc;
//! use std::time::{Duration, Instant};
//!
//! # futures_lite::future::block_on(async {
//! let library = Arc::new(FakeLoop::new(8));
//! let runs = library.clone();
//! let pump = Pump::builder().build(move || {
//!     runs.run_once().expect("not re-entered");
//!     // ffi::next_timeout(): nanoseconds on the fixture's clock, or nothing due.
//!     let next = runs.next_deadline_ns()?;
//!     let wait = Duration::from_nanos(next.saturating_sub(fake_loop::now_ns()));
//!     Some(Instant::now() + wait)
//! })?;
//! pump.spawn();
//! library.arm_in(5, Duration::from_millis(20));
//! pump.kick(); // hear the new deadline
//! let status = library.clone();
//! pump.wait_until(move || status.check(5)).timeout(Duration::from_secs(2)).await?;
//! # Ok::<(), ffi_pump::Error>(())
//! # }).unwrap();
//! ```
//!
//! A thread-affine library with timers (Tcl, libuv) keeps its state on its own thread and
//! answers requests: `start` makes the C timer with the request's [`Completer`] as its callback
//! data, the callback completes it, `cancel` deletes the timer if the request gives up.
//!
//! ```
//! use ffi_pump::{Completer, Pump, RequestId};
//! use std::collections::BTreeMap;
//! use std::time::{Duration, Instant};
//!
//! /// Stand-in for the C library's timers: when each is due, and its callback data.
//! #[derive(Default)]
//! struct Timers {
//!     due: BTreeMap<(Instant, RequestId), Completer<Instant>>,
//! }
//!
//! impl Timers {
//!     fn run_once(&mut self) -> Option<Instant> {
//!         let now = Instant::now();
//!         while let Some(entry) = self.due.first_entry().filter(|e| e.key().0 <= now) {
//!             entry.remove().complete(now); // the C callback fires
//!         }
//!         self.due.keys().next().map(|(at, _)| *at)
//!     }
//! }
//!
//! # futures_lite::future::block_on(async {
//! let (_pump, timers) = Pump::builder().build_with_state(Timers::default, Timers::run_once)?;
//! let at = Instant::now() + Duration::from_millis(20);
//! let fired = timers
//!     .request(
//!         move |timers, done| {
//!             timers.due.insert((at, done.id()), done); // ffi::timer_create(at, callback, done)
//!         },
//!         move |timers, id| {
//!             timers.due.remove(&(at, id)); // ffi::timer_delete()
//!         },
//!     )
//!     .timeout(Duration::from_secs(2))
//!     .await?;
//! assert!(fired >= at);
//! # Ok::<(), ffi_pump::Error>(())
//! # }).unwrap();
//! ```
//!
//! # Descriptor callbacks (curl, D-Bus)
//!
//! The library tells its loop, one descriptor at a time, what to watch
//! (`CURLMOPT_SOCKETFUNCTION`, `dbus_connection_set_watch_functions`). Build with
//! [`Builder::build_with_descriptors`]: the factory gets the [`Descriptors`] set for the state;
//! the callbacks watch and unwatch in it (they fire inside `run_once` or a call, on the loop's
//! thread); each run reads [`Descriptors::ready`] and hands each ready descriptor to the library.
//! The pump waits on the whole set, whether or not a task waits (data the library queued goes
//! out), on the loop's deadline, on kicks and calls.
//!
//! ```
//! # #[cfg(any(target_os = "linux", target_os = "android"))]
//! # {
//! use ffi_pump::{Completer, Descriptors, Interest, Pump};
//! use std::io::{Read, Write};
//! use std::os::unix::net::UnixStream;
//! use std::time::Duration;
//!
//! /// Stand-in for a library with one connection and replies it hands to whoever asked.
//! struct Connection {
//!     descriptors: Descriptors,
//!     socket: UnixStream,
//!     waiting: Vec<Completer<Vec<u8>>>,
//! }
//!
//! impl Connection {
//!     fn run_once(&mut self) -> Option<std::time::Instant> {
//!         let readable = self.descriptors.ready().any(|ready| ready.is_readable());
//!         if readable {
//!             let mut reply = vec![0; 64];
//!             let n = self.socket.read(&mut reply).unwrap_or(0);
//!             reply.truncate(n);
//!             if let Some(done) = self.waiting.pop() {
//!                 done.complete(reply);
//!             }
//!         }
//!         if self.waiting.is_empty() {
//!             // The library's watch callback: nothing to read for now.
//!             let _ = self.descriptors.unwatch(&self.socket);
//!         }
//!         None
//!     }
//! }
//!
//! # futures_lite::future::block_on(async {
//! let (socket, mut server) = UnixStream::pair()?;
//! socket.set_nonblocking(true)?;
//! let (_pump, connection) = Pump::builder().build_with_descriptors(
//!     move |descriptors| Connection { descriptors, socket, waiting: Vec::new() },
//!     Connection::run_once,
//! )?;
//! let reply = connection.request(
//!     |connection, done| {
//!         connection.waiting.push(done);
//!         // The library's watch callback: a reply is expected.
//!         let _ = connection.descriptors.watch(&connection.socket, Interest::READABLE);
//!     },
//!     |connection, _| connection.waiting.clear(),
//! );
//! server.write_all(b"pong")?;
//! assert_eq!(reply.timeout(Duration::from_secs(2)).await?, b"pong");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! # }
//! ```
//!
//! # Descriptor lists (GLib, libusb)
//!
//! The library hands out its whole list at once, each iteration (`g_main_context_query`'s
//! `GPollFD`s, `libusb_get_pollfds`). Bring the set in line with the list in `run_once`, using
//! [`Descriptors::watched`] to see what it holds, then read [`Descriptors::ready`] at the next
//! run (GLib's check) — the repository's GLib binding does exactly this
//! (`bindings/glib/src/polled.rs`).
//!
//! ```
//! # #[cfg(any(target_os = "linux", target_os = "android"))]
//! # {
//! use ffi_pump::{Descriptors, Interest, Pump};
//! use std::collections::HashSet;
//! use std::os::fd::{AsFd, AsRawFd};
//! use std::os::unix::net::UnixStream;
//!
//! /// Stand-in for a library whose poll list is its sockets, all for reading.
//! struct Context {
//!     descriptors: Descriptors,
//!     sockets: Vec<UnixStream>,
//!     iterations: u32,
//! }
//!
//! impl Context {
//!     fn run_once(&mut self) -> Option<std::time::Instant> {
//!         self.iterations += 1;
//!         let _ready: Vec<_> = self.descriptors.ready().collect(); // g_main_context_check()
//!         // g_main_context_query(): the list, whole; the set brought in line with it. A
//!         // descriptor no longer listed was closed here (one still open is `unwatch`ed).
//!         let listed: HashSet<_> = self.sockets.iter().map(|s| s.as_raw_fd()).collect();
//!         let stale: Vec<_> = self
//!             .descriptors
//!             .watched()
//!             .filter(|(fd, _)| !listed.contains(fd))
//!             .map(|(fd, _)| fd)
//!             .collect();
//!         for fd in stale {
//!             self.descriptors.forget(fd);
//!         }
//!         for socket in &self.sockets {
//!             let _ = self.descriptors.watch(socket.as_fd(), Interest::READABLE);
//!         }
//!         None
//!     }
//! }
//!
//! # futures_lite::future::block_on(async {
//! let (a, _peer) = UnixStream::pair()?;
//! let (pump, context) = Pump::builder().build_with_descriptors(
//!     move |descriptors| Context { descriptors, sockets: vec![a], iterations: 0 },
//!     Context::run_once,
//! )?;
//! pump.turn().await?;
//! assert_eq!(context.call(|context| context.descriptors.len()).await?, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! # }
//! ```
//!
//! # Then
//!
//! - Time bounds: every wait takes `.timeout(..)`; a request that gives up runs its cancel.
//! - Shutdown: [`Pump::close`], then [`Pump::closed`] once the state was dropped on its thread;
//!   cancels still owed run there first.
//! - What panics do, where: the crate docs' "Panics in user code".
//! - Costs: `BENCHMARKS.md` in the repository.
//!
//! [`Builder::build`]: crate::Builder::build
//! [`Builder::build_with_state`]: crate::Builder::build_with_state
//! [`Builder::build_with_descriptors`]: crate::Builder::build_with_descriptors
//! [`LoopHandle`]: crate::LoopHandle
//! [`LoopHandle::request`]: crate::LoopHandle::request
//! [`LoopHandle::subscribe`]: crate::LoopHandle::subscribe
//! [`Pump::wait_until`]: crate::Pump::wait_until
//! [`Pump::wait_key`]: crate::Pump::wait_key
//! [`Pump::close`]: crate::Pump::close
//! [`Pump::closed`]: crate::Pump::closed
//! [`Completions`]: crate::Completions
//! [`Completer`]: crate::Completer
//! [`Descriptors`]: crate::Descriptors
//! [`Descriptors::ready`]: crate::Descriptors::ready
//! [`Descriptors::watched`]: crate::Descriptors::watched
