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
//! Each example below runs as a doctest: on the repository's C fixture (`fake-loop`, a
//! handle-based stand-in for a C library), on a socket pair, or on a stand-in written in Rust.
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
//! data and returns the timer, the callback completes it, `cancel` gets the timer back and
//! deletes it if the request gives up — the pump keeps it meanwhile, so the binding keeps no
//! table of its own.
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
//! let (_pump, timers) = Pump::builder()
//!     .build_with_state(|_setup| Ok(Timers::default()), |timers, _run| timers.run_once())?;
//! let at = Instant::now() + Duration::from_millis(20);
//! let fired = timers
//!     .request(
//!         move |timers, done| {
//!             let timer = (at, done.id());
//!             timers.due.insert(timer, done); // ffi::timer_create(at, callback, done)
//!             timer // what the cancel needs
//!         },
//!         |timers, timer| {
//!             timers.due.remove(&timer); // ffi::timer_delete(timer)
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
//! The library tells its loop, one watch at a time, what to watch (`CURLMOPT_SOCKETFUNCTION`,
//! `dbus_connection_set_watch_functions`). Take the pump's set in the factory
//! ([`Setup::descriptors`]) and give its callbacks a clone each: they register the descriptor
//! the library names under a token of your choice (curl: the socket; D-Bus: an id given to each
//! watch — not its address, which a watch freed and made again in one run may reuse while that
//! run's [`Run::ready`] still holds the first one's entry), for
//! reading, writing or nothing (a disabled watch), and remove it — no lock, and no `unsafe` to
//! watch a descriptor by its number (a raw C callback still reaches its clone through its
//! `void *` user data, a boxed clone kept alive until the library is freed: that cast is the
//! binding's own `unsafe`). Each run hands [`Run::ready`] to the library,
//! token by token; its callbacks may change the set meanwhile, so hand only the entries
//! [`Descriptors::is_current`] says are current (a callback for an earlier entry may have freed,
//! disabled or remade a watch). The list has one entry per
//! registration: a library that processes a descriptor at a time (c-ares' `ares_process_fd`)
//! merges the entries of one [`fd`](crate::Ready::fd) first, or it processes that descriptor
//! twice. When its timer callback fires, keep the instant and return it from `run_once`;
//! [`Run::deadline_passed`] says when it came. A library with many timeouts
//! (`dbus_connection_set_timeout_functions`, Avahi's `AvahiPoll`) takes the loop's
//! [`Timeouts`](crate::Timeouts) ([`Setup::timeouts`]) for its timeout callbacks, each under a
//! token, and handles [`Run::expired`] at each run: the first timeout is the loop's deadline. The
//! pump waits on the whole set whether or not a task waits (data the library queued goes out), and
//! on kicks and calls; on the deadline only while a task waits, unless built with
//! [`idle_stop(false)`](crate::Builder::idle_stop) — which a library whose timers are its
//! protocol's (keep-alives, retransmissions, a bus's reply timeouts) needs.
//!
//! ```
//! # #[cfg(unix)]
//! # {
//! use ffi_pump::{Completer, Descriptors, Interest, Pump, Run};
//! use std::collections::VecDeque;
//! use std::io::{Read, Write};
//! use std::os::fd::AsRawFd;
//! use std::os::unix::net::UnixStream;
//! use std::time::Duration;
//!
//! const READ_WATCH: u64 = 1;
//! const WRITE_WATCH: u64 = 2;
//!
//! /// Stand-in for a D-Bus-like connection: a read watch and a write watch on one socket, each
//! /// toggled by the library on its own.
//! struct Connection {
//!     set: Descriptors, // what the library's watch callbacks hold
//!     socket: UnixStream,
//!     outgoing: Vec<u8>,
//!     /// The requests waiting for their replies, oldest first.
//!     waiting: VecDeque<Completer<Vec<u8>>>,
//! }
//!
//! impl Connection {
//!     /// The library's "toggle watch" callbacks.
//!     fn watches(&self) -> std::io::Result<()> {
//!         let (fd, writing) = (self.socket.as_raw_fd(), !self.outgoing.is_empty());
//!         self.set.watch(fd, Interest::READABLE, READ_WATCH)?;
//!         self.set.watch(fd, if writing { Interest::WRITABLE } else { Interest::NONE }, WRITE_WATCH)
//!     }
//!
//!     fn run_once(&mut self, run: &Run<'_>) -> Option<std::time::Instant> {
//!         for ready in run.ready() {
//!             match ready.token() {
//!                 // dbus_watch_handle(watch, DBUS_WATCH_WRITABLE)
//!                 WRITE_WATCH => {
//!                     let sent = self.socket.write(&self.outgoing).unwrap_or(0);
//!                     self.outgoing.drain(..sent);
//!                 }
//!                 // dbus_watch_handle(watch, DBUS_WATCH_READABLE), then dispatch: a reply
//!                 // answers the oldest request (a real library frames its messages and
//!                 // matches them by serial; one reply per read here)
//!                 _ => {
//!                     let mut reply = vec![0; 64];
//!                     let n = self.socket.read(&mut reply).unwrap_or(0);
//!                     reply.truncate(n);
//!                     if let Some(done) = self.waiting.pop_front() {
//!                         done.complete(reply);
//!                     }
//!                 }
//!             }
//!         }
//!         let _ = self.watches(); // the library toggles its watches as it goes
//!         None
//!     }
//! }
//!
//! # futures_lite::future::block_on(async {
//! let (socket, mut server) = UnixStream::pair()?;
//! socket.set_nonblocking(true)?;
//! let (_pump, connection) = Pump::builder().build_with_state(
//!     move |setup| {
//!         let connection =
//!             Connection { set: setup.descriptors()?, socket, outgoing: Vec::new(), waiting: VecDeque::new() };
//!         connection.watches()?; // dbus_connection_set_watch_functions()
//!         Ok(connection)
//!     },
//!     Connection::run_once,
//! )?;
//! let reply = connection.request(
//!     |connection, done| {
//!         connection.outgoing.extend_from_slice(b"ping"); // dbus_connection_send()
//!         let id = done.id();
//!         connection.waiting.push_back(done);
//!         let _ = connection.watches();
//!         id // what its cancel needs
//!     },
//!     // A request that gives up leaves the queue; the others keep their places.
//!     |connection, id| connection.waiting.retain(|done| done.id() != id),
//! );
//! let mut ping = [0; 4];
//! server.read_exact(&mut ping)?; // sent by the write watch
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
//! `GPollFD`s, `libusb_get_pollfds`). Hand the list to [`Descriptors::watch_only`] in `run_once`
//! (the set adds, changes and removes what differs), and read [`Run::ready`] at the next run
//! (GLib's check) — the repository's GLib binding does exactly this
//! (`bindings/glib/src/polled.rs`).
//!
//! ```
//! # #[cfg(unix)]
//! # {
//! use ffi_pump::{Descriptors, Interest, Pump, Run};
//! use std::os::fd::AsRawFd;
//! use std::os::unix::net::UnixStream;
//!
//! /// Stand-in for a library whose poll list is its sockets, all for reading.
//! struct Context {
//!     set: Descriptors,
//!     sockets: Vec<UnixStream>,
//! }
//!
//! impl Context {
//!     fn run_once(&mut self, run: &Run<'_>) -> Option<std::time::Instant> {
//!         let _revents = run.ready(); // g_main_context_check(), then dispatch
//!         // g_main_context_query(): the list, whole.
//!         let list = self.sockets.iter().map(|s| (s.as_raw_fd(), Interest::READABLE));
//!         let _ = self.set.watch_only(list);
//!         None
//!     }
//! }
//!
//! # futures_lite::future::block_on(async {
//! let (a, _peer) = UnixStream::pair()?;
//! let (pump, context) = Pump::builder().build_with_state(
//!     move |setup| Ok(Context { set: setup.descriptors()?, sockets: vec![a] }),
//!     Context::run_once,
//! )?;
//! pump.turn().await?;
//! assert_eq!(context.call(|context| context.set.len()).await?, 1);
//! context.call(|context| context.sockets.clear()).await?; // a source went away
//! pump.turn().await?;
//! assert_eq!(context.call(|context| context.set.len()).await?, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! # }
//! ```
//!
//! # C callbacks and their `void *`
//!
//! A real C library takes a function pointer and a `void *` of user data, and calls back with
//! it: the completer (or emitter) travels as that pointer. Leak a box of it in `start`, take it
//! back in the callback, and take it back in `cancel` from the library, which then never calls
//! with it: one `unsafe` each, whose argument is the library's promise. The descriptor set's
//! clone a watch callback reaches the same way is boxed the same way, and lives in the state
//! until the library is freed (free the library first: its last callbacks may unwatch).
//!
//! ```
//! use ffi_pump::{Completer, Pump};
//! use std::ffi::{c_int, c_void};
//! use std::time::Duration;
//!
//! /// Stand-in for the C API: `start(callback, user)` begins an operation, `process()` ends
//! /// each with a call of its callback, `cancel(op)` drops one uncalled and hands `user` back.
//! type Callback = extern "C" fn(user: *mut c_void, result: c_int);
//! #[derive(Default)]
//! struct Library {
//!     ops: Vec<Option<(Callback, *mut c_void)>>,
//! }
//! impl Library {
//!     fn start(&mut self, callback: Callback, user: *mut c_void) -> usize {
//!         self.ops.push(Some((callback, user)));
//!         self.ops.len() - 1
//!     }
//!     fn process(&mut self) {
//!         for (callback, user) in self.ops.iter_mut().filter_map(Option::take) {
//!             callback(user, 42);
//!         }
//!     }
//!     fn cancel(&mut self, op: usize) -> Option<*mut c_void> {
//!         self.ops[op].take().map(|(_, user)| user)
//!     }
//! }
//!
//! extern "C" fn finished(user: *mut c_void, result: c_int) {
//!     // SAFETY: `user` is the box `start` leaked below; the library calls back once, and
//!     // never for an operation `cancel` took back.
//!     let done = unsafe { Box::from_raw(user.cast::<Completer<c_int>>()) };
//!     done.complete(result);
//! }
//!
//! # futures_lite::future::block_on(async {
//! let (_pump, library) = Pump::builder()
//!     .build_with_state(|_| Ok(Library::default()), |library, _| {
//!         library.process(); // ffi::process(): the callbacks run here
//!         None
//!     })?;
//! let result = library
//!     .request(
//!         |library, done: Completer<c_int>| {
//!             let user = Box::into_raw(Box::new(done)).cast::<c_void>();
//!             library.start(finished, user) // what the cancel needs
//!         },
//!         |library, op| {
//!             if let Some(user) = library.cancel(op) {
//!                 // SAFETY: taken back from the library, which will not call back with it.
//!                 drop(unsafe { Box::from_raw(user.cast::<Completer<c_int>>()) });
//!             }
//!         },
//!     )
//!     .timeout(Duration::from_secs(2))
//!     .await?;
//! assert_eq!(result, 42);
//! # Ok::<(), ffi_pump::Error>(())
//! # }).unwrap();
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
//! [`Setup::descriptors`]: crate::Setup::descriptors
//! [`Setup::timeouts`]: crate::Setup::timeouts
//! [`Descriptors::is_current`]: crate::Descriptors::is_current
//! [`Run::expired`]: crate::Run::expired
//! [`Run::ready`]: crate::Run::ready
//! [`Run::deadline_passed`]: crate::Run::deadline_passed
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
//! [`Descriptors::watch_only`]: crate::Descriptors::watch_only
