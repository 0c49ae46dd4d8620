//! What a response holds and what the client counts, against a server that writes raw bytes.

mod server;

use std::time::Duration;

use ffi_pump_curl::{Client, Response};

/// A server that answers each request with `reply`; its port.
fn replying(reply: &'static [u8]) -> u16 {
    server::serve_reply(reply).expect("local server").port()
}

fn get(client: &Client, port: u16) -> Response {
    smol::block_on(client.get(
        &format!("http://127.0.0.1:{port}/"),
        Duration::from_secs(10),
    ))
    .expect("a response")
}

/// The final response's header, not an informational one's before it. Found by a probe of the
/// binding's docs (`header` gave the `103`'s).
#[test]
fn a_header_is_the_final_responses() {
    let port = replying(
        b"HTTP/1.1 103 Early Hints\r\nX-Which: early\r\n\r\n\
          HTTP/1.1 200 OK\r\nX-Which: final\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
    );
    let response = get(&Client::new().expect("client"), port);
    assert_eq!((response.status, &response.body[..]), (200, &b"ok"[..]));
    assert_eq!(
        response.header("x-which"),
        Some("final"),
        "{:?}",
        response.headers
    );
    assert!(
        response.headers.iter().any(|line| line == "X-Which: early"),
        "as received"
    );
}

/// Only HTTP's optional whitespace (spaces, tabs) goes from around a value, and the lines keep
/// everything but their line ends. Found by the same probe (a no-break space was dropped).
#[test]
fn a_header_value_keeps_what_is_not_http_whitespace() {
    let port = replying(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Nbsp: \t\xc2\xa0v\xc2\xa0 \r\nX-Vt: v\x0b\r\n\
          Connection: close\r\n\r\n",
    );
    let response = get(&Client::new().expect("client"), port);
    assert_eq!(response.header("X-Nbsp"), Some("\u{a0}v\u{a0}"));
    assert_eq!(response.header("X-Vt"), Some("v\u{b}"));
    assert!(response
        .headers
        .iter()
        .any(|line| line == "X-Nbsp: \t\u{a0}v\u{a0} "));
}

/// A transfer that finished is not counted once its request was answered. Found by the same
/// probe: `running()` still said 1 right after the `get` in about 2 of 5 gets.
#[test]
fn a_finished_transfer_is_not_counted_once_its_get_returned() {
    let port = replying(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    let client = Client::new().expect("client");
    for get_number in 0..200 {
        get(&client, port);
        assert_eq!(client.running(), 0, "after get {get_number}");
    }
}
