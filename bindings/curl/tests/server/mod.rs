//! A local HTTP/1.1 server to try the client against, and the bodies it sends: test code, shared
//! by `tests/curl.rs`, `tests/responses.rs` and `examples/curl_multi.rs` (each uses part of it),
//! not the binding's API.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When the server finished writing the response to each request that named an id.
static WRITTEN: Mutex<Option<HashMap<u64, Instant>>> = Mutex::new(None);

/// The ids of the requests the server has read (`/id/{id}` in their path), before it waits.
static RECEIVED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

/// Whether the server has read the request with `/id/{id}` in its path.
pub fn has_received(id: u64) -> bool {
    RECEIVED
        .lock()
        .ok()
        .and_then(|received| received.as_ref().map(|ids| ids.contains(&id)))
        .unwrap_or(false)
}

/// When the server finished writing its response to the request with `/id/{id}` in its path.
pub fn written_at(id: u64) -> Option<Instant> {
    WRITTEN.lock().ok()?.as_ref()?.get(&id).copied()
}

/// The body the local server sends for a request of `size` bytes: deterministic, so a client can
/// check it byte for byte.
pub fn expected_body(size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| (i.wrapping_mul(31).wrapping_add(size) % 251) as u8)
        .collect()
}

/// A checksum of a body (FNV-1a), to print and compare.
pub fn checksum(body: &[u8]) -> u64 {
    body.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// An HTTP/1.1 server on 127.0.0.1 (ephemeral port) in this process, one thread per connection:
/// `GET /size/{bytes}/delay/{ms}` answers `bytes` bytes of [`expected_body`] after `ms` ms;
/// with `/id/{id}` after it, the request is recorded for [`has_received`] and the moment it
/// finished writing for [`written_at`].
pub fn serve() -> std::io::Result<SocketAddr> {
    serve_with(answer)
}

/// A server on 127.0.0.1 that answers every request with `reply`, byte for byte, then closes
/// the connection: for responses the server above does not make (informational ones, odd
/// header bytes).
pub fn serve_reply(reply: &'static [u8]) -> std::io::Result<SocketAddr> {
    serve_with(move |mut stream| {
        read_head(&stream)?;
        stream.write_all(reply)?;
        stream.shutdown(std::net::Shutdown::Both)
    })
}

/// Accepts connections on an ephemeral port of 127.0.0.1, each answered by `answer` on a thread
/// of its own.
fn serve_with(
    answer: impl Fn(TcpStream) -> std::io::Result<()> + Copy + Send + 'static,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = answer(stream);
            });
        }
    });
    Ok(addr)
}

/// Reads a request's head (its line and header lines); returns its line.
fn read_head(stream: &TcpStream) -> std::io::Result<String> {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
    }
    Ok(request_line)
}

fn answer(stream: TcpStream) -> std::io::Result<()> {
    let request_line = read_head(&stream)?;
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (size, delay, id) = match parts.as_slice() {
        ["size", size, "delay", delay, rest @ ..] => (
            size.parse().unwrap_or(0),
            delay.parse().unwrap_or(0),
            match rest {
                ["id", id] => id.parse::<u64>().ok(),
                _ => None,
            },
        ),
        _ => (0, 0, None),
    };
    if let (Some(id), Ok(mut received)) = (id, RECEIVED.lock()) {
        received.get_or_insert_with(HashSet::new).insert(id);
    }
    std::thread::sleep(Duration::from_millis(delay));
    let body = expected_body(size);
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(&body)?;
    stream.flush()?;
    if let Some(id) = id {
        if let Ok(mut written) = WRITTEN.lock() {
            written
                .get_or_insert_with(HashMap::new)
                .insert(id, Instant::now());
        }
    }
    Ok(())
}
