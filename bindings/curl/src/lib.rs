//! A small HTTP client over libcurl's multi interface, driven by ffi-pump: what
//! `examples/curl_multi.rs` and `tests/curl.rs` use (with a local HTTP server of theirs,
//! `tests/server`).
//!
//! libcurl's `Multi` and its easy handles are `!Send`: they live on the loop's own thread
//! (`Builder::build_with_state`). A task starts its transfer there with `LoopHandle::request`
//! (which kicks the pump) and awaits it; the transfer keeps its `Completer`, which `run_once`
//! completes when curl reports it finished. A request that gives up removes its transfer from
//! the multi handle on that thread.
//!
//! By default ([`Schedule::Sockets`]) curl is driven by its socket API: its socket callback
//! watches and unwatches sockets in the pump's descriptor set, its timer callback says the
//! loop's deadline, and a run calls `curl_multi_socket_action` once per ready socket and once
//! more if that deadline came — no interval, and no call into curl while transfers wait on their
//! servers.
//!
//! libcurl built by the `curl` crate's `static-curl` waits with `select()` unless it is compiled
//! with `-DHAVE_POLL=1`, and then fails every connection on a descriptor past 1 023: this
//! workspace's `.cargo/config.toml` sets `CFLAGS` for that (see the README).
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use curl::easy::{Easy2, Handler, WriteError};
use curl::multi::{Easy2Handle, Events, Multi};
use ffi_pump::{Completer, Error, Interest, LoopHandle, Pump, Run, Setup};

/// A finished transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u32,
    /// The body, as received.
    pub body: Vec<u8>,
    /// The header lines, as received (`Name: value`, without line ends; bytes that are not
    /// UTF-8 replaced by U+FFFD), the status line of each response included: an informational
    /// one's (`103 Early Hints`) come before the final response's.
    pub headers: Vec<String>,
}

impl Response {
    /// The value of the first header named `name` (ASCII case-insensitive) of the final
    /// response, without the spaces and tabs around it.
    pub fn header(&self, name: &str) -> Option<&str> {
        let last_status = (self.headers.iter()).rposition(|line| line.starts_with("HTTP/"));
        let own = &self.headers[last_status.map_or(0, |at| at + 1)..];
        let blank = |c: char| c == ' ' || c == '\t';
        own.iter().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim_matches(blank)
                .eq_ignore_ascii_case(name)
                .then_some(value.trim_matches(blank))
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
    /// A URL the client does not fetch, handed back: its scheme is not `http` or `https`
    /// (libcurl would also read `file://`, speak its other protocols, or guess one for a URL
    /// without a scheme), or it holds a NUL byte.
    Url(String),
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
        let line = line.trim_end_matches(['\r', '\n']);
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
    /// `perform()` at curl's own next timeout, but at most 1 ms ahead while a transfer is open:
    /// without socket readiness curl sees what arrived only when `perform()` looks.
    CurlTimeout,
    /// Every `period` while a transfer is open, as an interval-driven client does: the baseline
    /// of the example's measurement. A zero period runs curl back to back meanwhile.
    Every(Duration),
}

/// The most a run waits for data while a transfer is open, with [`Schedule::CurlTimeout`].
const POLL: Duration = Duration::from_millis(1);

/// What the client counts, read from any thread.
#[derive(Debug, Default)]
struct Counters {
    running: AtomicUsize,
    runs: AtomicU64,
    refused: AtomicU64,
}

/// The multi handle and its transfers, on the loop's thread.
struct Transfers {
    schedule: Schedule,
    multi: Multi,
    open: HashMap<usize, (Easy2Handle<Body>, Completer<Outcome>)>,
    /// When curl's timer falls due, as its timer callback last said ([`Schedule::Sockets`]).
    timer: Arc<Mutex<Option<Instant>>>,
    counters: Arc<Counters>,
}

impl Transfers {
    fn new(
        setup: &mut Setup,
        schedule: Schedule,
        counters: Arc<Counters>,
    ) -> std::io::Result<Self> {
        let mut transfers = Transfers {
            schedule,
            multi: Multi::new(),
            open: HashMap::new(),
            timer: Arc::default(),
            counters,
        };
        if schedule == Schedule::Sockets {
            let (set, counters) = (setup.descriptors()?, transfers.counters.clone());
            // Only fails for an option libcurl does not know; these are in every 7.x.
            let _ = transfers.multi.socket_function(move |socket, events, _| {
                #[allow(clippy::unnecessary_cast)] // a `u64` already on Windows (`SOCKET`)
                let token = socket as u64;
                let interest = match (events.input(), events.output()) {
                    (true, true) => Interest::READABLE | Interest::WRITABLE,
                    (false, true) => Interest::WRITABLE,
                    _ => Interest::READABLE,
                };
                let watched = match events.remove() {
                    true => set.unwatch(token),
                    false => set.watch(socket, interest, token),
                };
                if watched.is_err() {
                    counters.refused.fetch_add(1, Ordering::Relaxed);
                }
            });
            let timer = transfers.timer.clone();
            let _ = transfers.multi.timer_function(move |timeout| {
                *timer.lock().unwrap_or_else(PoisonError::into_inner) =
                    timeout.map(|timeout| Instant::now() + timeout);
                true
            });
        }
        Ok(transfers)
    }

    /// Adds the transfer; its token is what a cancel needs.
    fn start(&mut self, url: &str, done: Completer<Outcome>) -> usize {
        let token = done.id().get() as usize;
        let mut easy = Easy2::new(Body::default());
        let added = easy.url(url).map_err(|e| e.to_string()).and_then(|()| {
            let mut handle = self.multi.add2(easy).map_err(|e| e.to_string())?;
            handle.set_token(token).map_err(|e| e.to_string())?;
            Ok(handle)
        });
        match added {
            Ok(handle) => drop(self.open.insert(token, (handle, done))),
            Err(err) => done.complete(Err(err)),
        }
        token
    }

    /// The request for `token` gave up: the transfer leaves the multi handle.
    fn cancel(&mut self, token: usize) {
        if let Some((handle, _)) = self.open.remove(&token) {
            let _ = self.multi.remove2(handle);
        }
        self.counters
            .running
            .store(self.open.len(), Ordering::SeqCst);
    }

    /// One run: what the schedule asks of curl, then the finished transfers reported; returns
    /// when the next run is due.
    fn run_once(&mut self, run: &Run<'_>) -> Option<Instant> {
        let runs = &self.counters.runs;
        if self.schedule == Schedule::Sockets {
            for ready in run.ready() {
                let mut events = Events::new();
                events
                    .input(ready.is_readable())
                    .output(ready.is_writable())
                    .error(ready.is_error());
                runs.fetch_add(1, Ordering::SeqCst);
                let _ = self.multi.action(ready.fd(), &events);
            }
            if run.deadline_passed() {
                runs.fetch_add(1, Ordering::SeqCst);
                let _ = self.multi.timeout();
            }
            // Read last: removing a finished transfer may move curl's timer.
            self.report_finished();
            return *self.timer.lock().unwrap_or_else(PoisonError::into_inner);
        }
        runs.fetch_add(1, Ordering::SeqCst);
        let _ = self.multi.perform();
        self.report_finished();
        if self.open.is_empty() {
            return None;
        }
        let wait = match self.schedule {
            Schedule::Every(period) => period,
            // curl's own next timeout, but no later than `POLL` while transfers are open.
            _ => (self.multi.get_timeout().ok().flatten()).map_or(POLL, |t| t.min(POLL)),
        };
        // A period past the clock's range never comes.
        Instant::now().checked_add(wait)
    }

    /// Completes every transfer curl reported finished.
    fn report_finished(&mut self) {
        let mut done = Vec::new();
        self.multi.messages(|message| {
            if let (Ok(token), Some(result)) = (message.token(), message.result()) {
                done.push((token, result));
            }
        });
        for (token, result) in done {
            let Some((handle, completer)) = self.open.remove(&token) else {
                continue;
            };
            // Counted before the request is answered: its task may read it as it wakes.
            let running = &self.counters.running;
            running.store(self.open.len(), Ordering::SeqCst);
            completer.complete(match (self.multi.remove2(handle), result) {
                (Ok(mut easy), Ok(())) => Ok(Response {
                    status: easy.response_code().unwrap_or(0),
                    body: std::mem::take(&mut easy.get_mut().body),
                    headers: std::mem::take(&mut easy.get_mut().headers),
                }),
                (_, Err(err)) => Err(err.to_string()),
                (Err(err), Ok(())) => Err(err.to_string()),
            });
        }
        self.counters
            .running
            .store(self.open.len(), Ordering::SeqCst);
    }
}

/// The client: clone-free, share it behind an `Arc`.
#[derive(Debug)]
pub struct Client {
    pump: Pump,
    transfers: LoopHandle<Transfers>,
    counters: Arc<Counters>,
}

impl Client {
    /// Starts the loop's thread that owns the multi handle, driven by curl's sockets and timer.
    pub fn new() -> Result<Client, Error> {
        Client::with_schedule(Schedule::Sockets)
    }

    /// Starts the loop's thread that owns the multi handle, run on `schedule`.
    pub fn with_schedule(schedule: Schedule) -> Result<Client, Error> {
        let counters = Arc::new(Counters::default());
        let kept = counters.clone();
        // Serviced whether or not a request waits: curl also handles its sockets for connections
        // it keeps alive, and nothing is due then, so the pump sleeps.
        let (pump, transfers) = Pump::builder()
            .name("libcurl")
            .idle_stop(schedule != Schedule::Sockets)
            .build_with_state(
                move |setup| Ok(Transfers::new(setup, schedule, kept)?),
                Transfers::run_once,
            )?;
        Ok(Client {
            pump,
            transfers,
            counters,
        })
    }

    /// GETs `url`, giving up after `timeout` (the transfer is then removed from the multi handle).
    ///
    /// # Errors
    ///
    /// [`GetError::Url`] unless `url` starts with `http://` or `https://` (in any case; no
    /// redirect is followed, so the transfer speaks only that) and holds no NUL byte.
    pub async fn get(&self, url: &str, timeout: Duration) -> Result<Response, GetError> {
        let scheme = url.split_once("://").map(|(scheme, _)| scheme);
        let http = |s: &str| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https");
        if !scheme.is_some_and(http) || url.contains('\0') {
            return Err(GetError::Url(url.to_string()));
        }
        let url = url.to_string();
        self.transfers
            .request(
                move |transfers, done| transfers.start(&url, done),
                Transfers::cancel,
            )
            .timeout(timeout)
            .await
            .map_err(GetError::Pump)?
            .map_err(GetError::Curl)
    }

    /// Transfers in the multi handle after the last round.
    pub fn running(&self) -> usize {
        self.counters.running.load(Ordering::SeqCst)
    }

    /// Calls into curl's loop so far: `perform()`, or `socket_action()` (per ready socket and per
    /// expiry of curl's timer).
    pub fn runs(&self) -> u64 {
        self.counters.runs.load(Ordering::SeqCst)
    }

    /// Sockets curl asked to watch that the kernel's set refused (with [`Schedule::Sockets`]); 0
    /// unless something is wrong with the descriptors curl hands out.
    pub fn refused_watches(&self) -> u64 {
        self.counters.refused.load(Ordering::SeqCst)
    }

    /// The pump that drives the multi handle.
    pub fn pump(&self) -> &Pump {
        &self.pump
    }
}
