//! A small HTTP client over libcurl's multi interface, driven by ffi-pump, and a local HTTP server
//! ([`server`]) to try it against: what `examples/curl_multi.rs` and `tests/curl.rs` use.
//!
//! libcurl's `Multi` and its easy handles are `!Send`: they live with the pump on its own thread
//! (`Builder::build_with_descriptors`). A task submits its request there through the pump's
//! `LoopHandle` (which kicks the pump), and awaits its token in a `Completions` table, into which
//! `run_once` reports every finished transfer. A wait that gives up removes its transfer from the
//! multi handle on that thread (`WaitKey::on_cancel`).
//!
//! By default ([`Schedule::Sockets`]) curl is driven by its socket API: its socket callback
//! watches and unwatches descriptors in the pump's [`Descriptors`] set, its timer callback sets
//! the loop's deadline, and a run calls `curl_multi_socket_action` once per ready descriptor and
//! once more if curl's timer fell due — no interval, and no call into curl while transfers wait
//! on their servers.
//!
//! libcurl built by the `curl` crate's `static-curl` waits with `select()` unless it is compiled
//! with `-DHAVE_POLL=1`, and then fails every connection on a descriptor past 1 023: this
//! workspace's `.cargo/config.toml` sets `CFLAGS` for that (see the README).
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![deny(unsafe_code)]

pub mod server;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::os::fd::BorrowedFd;
use std::sync::Mutex;

use curl::easy::{Easy2, Handler, WriteError};
use curl::multi::{Easy2Handle, Events, Multi, Socket, SocketEvents};
use ffi_pump::{Completions, Descriptors, Error, Interest, LoopHandle, Pump};

/// A finished transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u32,
    /// The body, as received.
    pub body: Vec<u8>,
    /// The header lines, as received (`Name: value`, without line ends).
    pub headers: Vec<String>,
}

impl Response {
    /// The value of the first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then_some(value.trim())
        })
    }
}

/// Why a request did not produce a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetError {
    /// libcurl's own error (connection refused, …).
    Curl(String),
    /// The pump's: timed out, closed.
    Pump(Error),
}

/// Collects a response: its body and header lines.
#[derive(Default)]
struct Body {
    body: Vec<u8>,
    headers: Vec<String>,
}

impl Handler for Body {
    fn write(&mut self, data: &[u8]) -> Result<usize, WriteError> {
        self.body.extend_from_slice(data);
        Ok(data.len())
    }

    fn header(&mut self, data: &[u8]) -> bool {
        let line = String::from_utf8_lossy(data);
        let line = line.trim_end();
        if !line.is_empty() {
            self.headers.push(line.to_string());
        }
        true
    }
}

type Outcome = Result<Response, String>;

/// When the client runs curl.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// When one of curl's sockets is ready and when curl's timer falls due (the default):
    /// `curl_multi_socket_action` for each, no interval.
    Sockets,
    /// `perform()` at curl's own next timeout, but at most 1 ms ahead while a transfer is open (the
    /// default): without socket readiness curl sees what arrived only when `perform()` looks.
    CurlTimeout,
    /// Every `period` while a transfer is open, as an interval-driven client does: the baseline
    /// of the example's measurement.
    Every(Duration),
}

/// The most a run waits for data while a transfer is open, with [`Schedule::CurlTimeout`].
const POLL: Duration = Duration::from_millis(1);

/// What curl's callbacks tell the socket-driven client; shared with them (they must be `Send`),
/// used only on the pump thread.
#[derive(Debug)]
struct SocketState {
    /// The descriptors curl asked to watch, and for what.
    descriptors: Mutex<Descriptors>,
    /// When curl's timer falls due (`CURLMOPT_TIMERFUNCTION`), if it is set.
    deadline: Mutex<Option<Instant>>,
    /// Watches the kernel refused (a transfer on such a socket ends at curl's own timeout, or the
    /// caller's); [`Client::refused_watches`] reports them.
    refused: Arc<AtomicU64>,
}

/// Runs `f` on the socket curl hands its socket callback.
#[allow(unsafe_code)]
fn with_socket<T>(socket: Socket, f: impl FnOnce(BorrowedFd<'_>) -> T) -> T {
    // SAFETY: curl calls its socket callback with a socket it holds open for the duration of the
    // call (it reports CURL_POLL_REMOVE before it closes one), and `f` does not outlive the call.
    let fd = unsafe { BorrowedFd::borrow_raw(socket) };
    f(fd)
}

impl SocketState {
    /// `CURLMOPT_SOCKETFUNCTION`: watch `socket` for what curl waits on, or stop.
    fn socket_changed(&self, socket: Socket, events: SocketEvents) {
        let mut descriptors = self.descriptors.lock().unwrap_or_else(|e| e.into_inner());
        if events.remove() {
            // A socket already closed has left the kernel's set: nothing to undo then.
            let _ = with_socket(socket, |fd| descriptors.unwatch(fd));
            return;
        }
        let interest = match (events.input(), events.output()) {
            (true, true) => Interest::READABLE | Interest::WRITABLE,
            (false, true) => Interest::WRITABLE,
            _ => Interest::READABLE,
        };
        if with_socket(socket, |fd| descriptors.watch(fd, interest)).is_err() {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `CURLMOPT_TIMERFUNCTION`: curl's one timer, `None` to delete it.
    fn timer_changed(&self, timeout: Option<Duration>) -> bool {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) =
            timeout.map(|timeout| Instant::now() + timeout);
        true
    }

    /// Whether curl's timer fell due; clears it, as curl expects one call per expiry.
    fn take_due(&self) -> bool {
        let mut deadline = self.deadline.lock().unwrap_or_else(|e| e.into_inner());
        match *deadline {
            Some(at) if at <= Instant::now() => {
                *deadline = None;
                true
            }
            _ => false,
        }
    }
}

/// How the pump thread drives the multi handle.
#[derive(Debug)]
enum Drive {
    /// [`Schedule::Sockets`].
    Sockets(Arc<SocketState>),
    /// `perform()` this long after the last run at the latest, while a transfer is open:
    /// `None` is curl's own timeout capped at [`POLL`] ([`Schedule::CurlTimeout`]).
    Perform(Option<Duration>),
}

/// The multi handle and its transfers, on the pump thread.
struct Transfers {
    drive: Drive,
    multi: Multi,
    handles: HashMap<u64, Easy2Handle<Body>>,
    finished: Completions<u64, Outcome>,
    running: Arc<AtomicUsize>,
    runs: Arc<AtomicU64>,
}

impl Transfers {
    fn start(&mut self, token: u64, url: &str) {
        let started = (|| {
            let mut easy = Easy2::new(Body::default());
            easy.url(url).map_err(|e| e.to_string())?;
            let mut handle = self.multi.add2(easy).map_err(|e| e.to_string())?;
            handle
                .set_token(token as usize)
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(handle)
        })();
        match started {
            Ok(handle) => {
                self.handles.insert(token, handle);
            }
            Err(err) => {
                self.finished.complete(token, Err(err));
            }
        }
    }

    /// The wait for `token` gave up: the transfer leaves the multi handle.
    fn cancel(&mut self, token: u64) {
        if let Some(handle) = self.handles.remove(&token) {
            let _ = self.multi.remove2(handle);
        }
        self.running.store(self.handles.len(), Ordering::SeqCst);
    }

    /// One run: what the schedule asks of curl, then the finished transfers reported; returns
    /// when the next run is due.
    fn run_once(&mut self) -> Option<Instant> {
        match &self.drive {
            Drive::Sockets(state) => {
                let state = state.clone();
                self.act_on_sockets(&state);
                // Read last: removing a finished transfer may move curl's timer.
                self.report_finished();
                let deadline = *state.deadline.lock().unwrap_or_else(|e| e.into_inner());
                deadline
            }
            Drive::Perform(period) => {
                let period = *period;
                self.runs.fetch_add(1, Ordering::SeqCst);
                let _ = self.multi.perform();
                self.report_finished();
                if self.handles.is_empty() {
                    return None;
                }
                // curl's own next timeout, but no later than `POLL` while transfers are open.
                let wait = period.unwrap_or_else(|| {
                    let timeout = self.multi.get_timeout().ok().flatten();
                    timeout.map_or(POLL, |t| t.min(POLL))
                });
                Some(Instant::now() + wait)
            }
        }
    }

    /// `curl_multi_socket_action` for every ready socket, and for curl's timer if it fell due.
    fn act_on_sockets(&mut self, state: &SocketState) {
        // Collected first: curl's socket callback changes the set while it acts.
        let ready: Vec<_> = {
            let mut descriptors = state.descriptors.lock().unwrap_or_else(|e| e.into_inner());
            descriptors.ready().collect()
        };
        for ready in ready {
            let mut events = Events::new();
            events
                .input(ready.is_readable())
                .output(ready.is_writable())
                .error(ready.is_error());
            self.runs.fetch_add(1, Ordering::SeqCst);
            let _ = self.multi.action(ready.fd(), &events);
        }
        if state.take_due() {
            self.runs.fetch_add(1, Ordering::SeqCst);
            let _ = self.multi.timeout();
        }
    }

    /// Completes every transfer curl reported finished.
    fn report_finished(&mut self) {
        let mut done = Vec::new();
        // Each message is delivered once: keep it by token.
        self.multi.messages(|message| {
            if let (Ok(token), Some(result)) = (message.token(), message.result()) {
                done.push((token as u64, result));
            }
        });
        for (token, result) in done {
            let Some(handle) = self.handles.remove(&token) else {
                continue;
            };
            let outcome = match (self.multi.remove2(handle), result) {
                (Ok(mut easy), Ok(())) => Ok(Response {
                    status: easy.response_code().unwrap_or(0),
                    body: std::mem::take(&mut easy.get_mut().body),
                    headers: std::mem::take(&mut easy.get_mut().headers),
                }),
                (_, Err(err)) => Err(err.to_string()),
                (Err(err), Ok(())) => Err(err.to_string()),
            };
            self.finished.complete(token, outcome);
        }
        self.running.store(self.handles.len(), Ordering::SeqCst);
    }
}

/// The client: clone-free, share it behind an `Arc`.
#[derive(Debug)]
pub struct Client {
    pump: Pump,
    transfers: LoopHandle<Transfers>,
    finished: Completions<u64, Outcome>,
    next_token: AtomicU64,
    running: Arc<AtomicUsize>,
    runs: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
}

impl Client {
    /// Starts the pump thread that owns the multi handle, driven by curl's sockets and timer.
    pub fn new() -> Result<Client, Error> {
        Client::with_schedule(Schedule::Sockets)
    }

    /// Starts the pump thread that owns the multi handle, run on `schedule`.
    pub fn with_schedule(schedule: Schedule) -> Result<Client, Error> {
        let finished = Completions::new();
        let running = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicU64::new(0));
        let refused = Arc::new(AtomicU64::new(0));
        let refused_watches = refused.clone();
        let (table, gauge, counter) = (finished.clone(), running.clone(), runs.clone());
        let transfers = move |drive| Transfers {
            drive,
            multi: Multi::new(),
            handles: HashMap::new(),
            finished: table,
            running: gauge,
            runs: counter,
        };
        // Serviced whether or not a request waits: curl also handles its sockets for connections
        // it keeps alive, and nothing is due then, so the pump sleeps.
        let builder = Pump::builder()
            .name("libcurl")
            .idle_stop(!matches!(schedule, Schedule::Sockets));
        let (pump, transfers) = match schedule {
            Schedule::Sockets => builder.build_with_descriptors(
                move |descriptors| {
                    let state = Arc::new(SocketState {
                        descriptors: Mutex::new(descriptors),
                        deadline: Mutex::new(None),
                        refused: refused_watches.clone(),
                    });
                    let mut transfers = transfers(Drive::Sockets(state.clone()));
                    let on_socket = state.clone();
                    // Only fails for an option libcurl does not know; these are in every 7.x.
                    let _ = transfers.multi.socket_function(move |socket, events, _| {
                        on_socket.socket_changed(socket, events)
                    });
                    let _ = transfers
                        .multi
                        .timer_function(move |timeout| state.timer_changed(timeout));
                    transfers
                },
                Transfers::run_once,
            )?,
            Schedule::CurlTimeout => builder
                .build_with_state(move || transfers(Drive::Perform(None)), Transfers::run_once)?,
            Schedule::Every(period) => builder.build_with_state(
                move || transfers(Drive::Perform(Some(period))),
                Transfers::run_once,
            )?,
        };
        Ok(Client {
            pump,
            transfers,
            finished,
            next_token: AtomicU64::new(0),
            running,
            runs,
            refused,
        })
    }

    /// GETs `url`, giving up after `timeout` (the transfer is then removed from the multi handle).
    pub async fn get(&self, url: &str, timeout: Duration) -> Result<Response, GetError> {
        let token = self.next_token.fetch_add(1, Ordering::SeqCst);
        let url = url.to_string();
        self.transfers
            .submit(
                &self.finished,
                token,
                move |transfers| transfers.start(token, &url),
                move |transfers| transfers.cancel(token),
            )
            .timeout(timeout)
            .await
            .map_err(GetError::Pump)?
            .map_err(GetError::Curl)
    }

    /// Transfers in the multi handle after the last round.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Calls into curl's loop so far: `perform()`, or `socket_action()` (per ready socket and per
    /// expiry of curl's timer).
    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::SeqCst)
    }

    /// Sockets curl asked to watch that the kernel's set refused (with [`Schedule::Sockets`]); 0
    /// unless something is wrong with the descriptors curl hands out.
    pub fn refused_watches(&self) -> u64 {
        self.refused.load(Ordering::SeqCst)
    }

    /// The pump that drives the multi handle.
    pub fn pump(&self) -> &Pump {
        &self.pump
    }
}
