//! A small HTTP client over libcurl's multi interface, driven by ffi-pump, and a local HTTP server
//! ([`server`]) to try it against: what `examples/curl_multi.rs` and `tests/curl.rs` use.
//!
//! libcurl's `Multi` and its easy handles are `!Send`: they live with the pump on its own thread
//! (`Builder::build_with_state`). A task posts its request there through the pump's
//! `LoopHandle` (which kicks the pump), and awaits its token in a `Completions` table, into which
//! `run_once` reports every finished transfer after its one `perform()`. A wait that gives up
//! removes its transfer from the multi handle on that thread (`WaitKey::on_cancel`).
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod server;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use curl::easy::{Easy2, Handler, WriteError};
use curl::multi::{Easy2Handle, Multi};
use ffi_pump::{Completions, Error, LoopHandle, Pump};

/// A finished transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u32,
    /// The body, as received.
    pub body: Vec<u8>,
}

/// Why a request did not produce a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetError {
    /// libcurl's own error (connection refused, …).
    Curl(String),
    /// The pump's: timed out, closed.
    Pump(Error),
}

/// Collects a response body.
struct Body(Vec<u8>);

impl Handler for Body {
    fn write(&mut self, data: &[u8]) -> Result<usize, WriteError> {
        self.0.extend_from_slice(data);
        Ok(data.len())
    }
}

type Outcome = Result<Response, String>;

/// When the client runs curl.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// At curl's own next timeout, but at most 1 ms ahead while a transfer is open (the
    /// default): without socket readiness curl sees what arrived only when `perform()` looks.
    CurlTimeout,
    /// Every `period` while a transfer is open, as an interval-driven client does: the baseline
    /// of the example's measurement.
    Every(Duration),
}

/// The most a run waits for data while a transfer is open, with [`Schedule::CurlTimeout`].
const POLL: Duration = Duration::from_millis(1);

/// The multi handle and its transfers, on the pump thread.
struct Transfers {
    schedule: Schedule,
    multi: Multi,
    handles: HashMap<u64, Easy2Handle<Body>>,
    finished: Completions<u64, Outcome>,
    running: Arc<AtomicUsize>,
    performs: Arc<AtomicU64>,
}

impl Transfers {
    fn start(&mut self, token: u64, url: &str) {
        let started = (|| {
            let mut easy = Easy2::new(Body(Vec::new()));
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

    /// One run: `perform()` once, report what finished; then when the next run is due.
    fn run_once(&mut self) -> Option<Instant> {
        self.performs.fetch_add(1, Ordering::SeqCst);
        let _ = self.multi.perform();
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
                    body: std::mem::take(&mut easy.get_mut().0),
                }),
                (_, Err(err)) => Err(err.to_string()),
                (Err(err), Ok(())) => Err(err.to_string()),
            };
            self.finished.complete(token, outcome);
        }
        self.running.store(self.handles.len(), Ordering::SeqCst);
        if self.handles.is_empty() {
            return None;
        }
        let wait = match self.schedule {
            // curl's own next timeout, but no later than `POLL` while transfers are open.
            Schedule::CurlTimeout => {
                let timeout = self.multi.get_timeout().ok().flatten();
                timeout.map_or(POLL, |t| t.min(POLL))
            }
            Schedule::Every(period) => period,
        };
        Some(Instant::now() + wait)
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
    performs: Arc<AtomicU64>,
}

impl Client {
    /// Starts the pump thread that owns the multi handle, run at curl's own timeouts.
    pub fn new() -> Result<Client, Error> {
        Client::with_schedule(Schedule::CurlTimeout)
    }

    /// Starts the pump thread that owns the multi handle, run on `schedule`.
    pub fn with_schedule(schedule: Schedule) -> Result<Client, Error> {
        let finished = Completions::new();
        let running = Arc::new(AtomicUsize::new(0));
        let performs = Arc::new(AtomicU64::new(0));
        let (table, gauge, counter) = (finished.clone(), running.clone(), performs.clone());
        let (pump, transfers) = Pump::builder().name("libcurl").build_with_state(
            move || Transfers {
                schedule,
                multi: Multi::new(),
                handles: HashMap::new(),
                finished: table,
                running: gauge,
                performs: counter,
            },
            Transfers::run_once,
        )?;
        Ok(Client {
            pump,
            transfers,
            finished,
            next_token: AtomicU64::new(0),
            running,
            performs,
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

    /// `perform()` calls so far.
    pub fn performs(&self) -> u64 {
        self.performs.load(Ordering::SeqCst)
    }

    /// The pump that drives the multi handle.
    pub fn pump(&self) -> &Pump {
        &self.pump
    }
}
