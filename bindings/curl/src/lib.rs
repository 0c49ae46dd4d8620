//! A small HTTP client over libcurl's multi interface, driven by ffi-pump, and a local HTTP server
//! ([`server`]) to try it against: what `examples/curl_multi.rs` and `tests/curl.rs` use.
//!
//! libcurl's `Multi` and its easy handles are `!Send`: they live on the pump's own thread
//! (`Builder::build_on_thread`). Tasks submit requests through a channel and `kick()` the pump;
//! `run_once` adds them, calls `perform()` once, and reports every finished transfer into a
//! `Completions` table, where the task waiting for it picks it up.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod server;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use curl::easy::{Easy2, Handler, WriteError};
use curl::multi::{Easy2Handle, Multi};
use ffi_pump::{Completions, Error, Pump};

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

enum Command {
    Get { token: u64, url: String },
    Cancel { token: u64 },
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

/// The multi handle and its transfers, on the pump thread.
struct Transfers {
    multi: Multi,
    handles: HashMap<u64, Easy2Handle<Body>>,
    commands: mpsc::Receiver<Command>,
    finished: Completions<u64, Outcome>,
    running: Arc<AtomicUsize>,
    performs: Arc<AtomicU64>,
}

impl Transfers {
    fn start(&mut self, token: u64, url: &str) -> Result<(), String> {
        let mut easy = Easy2::new(Body(Vec::new()));
        easy.url(url).map_err(|e| e.to_string())?;
        let mut handle = self.multi.add2(easy).map_err(|e| e.to_string())?;
        handle
            .set_token(token as usize)
            .map_err(|e| e.to_string())?;
        self.handles.insert(token, handle);
        Ok(())
    }

    /// One round: take the new commands, `perform()` once, report what finished.
    fn run_once(&mut self) {
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::Get { token, url } => {
                    if let Err(err) = self.start(token, &url) {
                        self.finished.complete(token, Err(err));
                    }
                }
                Command::Cancel { token } => {
                    if let Some(handle) = self.handles.remove(&token) {
                        let _ = self.multi.remove2(handle);
                    }
                    // A result that arrived as the wait gave up goes too.
                    self.finished.take(&token);
                }
            }
        }
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
    }
}

/// The client: clone-free, share it behind an `Arc`.
#[derive(Debug)]
pub struct Client {
    pump: Pump,
    commands: mpsc::Sender<Command>,
    finished: Completions<u64, Outcome>,
    next_token: AtomicU64,
    running: Arc<AtomicUsize>,
    performs: Arc<AtomicU64>,
}

impl Client {
    /// Starts the pump thread that owns the multi handle.
    pub fn new() -> Result<Client, Error> {
        let (commands, receiver) = mpsc::channel();
        let finished = Completions::new();
        let running = Arc::new(AtomicUsize::new(0));
        let performs = Arc::new(AtomicU64::new(0));
        let (table, gauge, counter) = (finished.clone(), running.clone(), performs.clone());
        let pump = Pump::builder()
            .interval(Duration::from_millis(1))
            .build_on_thread(move || {
                let mut transfers = Transfers {
                    multi: Multi::new(),
                    handles: HashMap::new(),
                    commands: receiver,
                    finished: table,
                    running: gauge,
                    performs: counter,
                };
                move || transfers.run_once()
            })?;
        Ok(Client {
            pump,
            commands,
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
        self.commands
            .send(Command::Get { token, url })
            .map_err(|_| GetError::Pump(Error::Closed))?;
        // Start the transfer now, not at the next tick.
        self.pump.kick();
        match self
            .pump
            .wait_key(&self.finished, token)
            .timeout(timeout)
            .await
        {
            Ok(outcome) => outcome.map_err(GetError::Curl),
            Err(err) => {
                let _ = self.commands.send(Command::Cancel { token });
                self.pump.kick();
                Err(GetError::Pump(err))
            }
        }
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
