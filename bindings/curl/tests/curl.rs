//! libcurl's multi interface driven by ffi-pump (the `curl` crate, libcurl built from source).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi_pump::Error;
use ffi_pump_curl::server::{checksum, expected_body, serve};
use ffi_pump_curl::{Client, GetError};

#[test]
fn every_body_arrives_intact() {
    let addr = serve().expect("local server");
    let client = Arc::new(Client::new().expect("client"));
    smol::block_on(async {
        let tasks: Vec<_> = (0..40_usize)
            .map(|i| {
                let client = client.clone();
                let size = [0, 10, 4_096, 300_000][i % 4];
                let url = format!("http://{addr}/size/{size}/delay/{}", (i % 3) * 10);
                smol::spawn(async move { (size, client.get(&url, Duration::from_secs(10)).await) })
            })
            .collect();
        for task in tasks {
            let (size, outcome) = task.await;
            let response = outcome.expect("transfer succeeds");
            assert_eq!(response.status, 200);
            assert_eq!(response.body.len(), size, "length");
            assert_eq!(
                checksum(&response.body),
                checksum(&expected_body(size)),
                "checksum"
            );
        }
    });
    // One perform() per round, whatever the number of transfers in flight.
    assert_eq!(client.performs(), client.pump().stats().rounds);
    assert_eq!(client.running(), 0);
}

#[test]
fn a_port_nobody_listens_on_gives_the_curl_error() {
    // Bind and drop a listener: the port is then (almost surely) closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("ephemeral port")
        .port();
    let client = Client::new().expect("client");
    let started = Instant::now();
    let outcome = smol::block_on(client.get(
        &format!("http://127.0.0.1:{port}/"),
        Duration::from_secs(10),
    ));
    match outcome {
        Err(GetError::Curl(message)) => assert!(!message.is_empty()),
        other => panic!("expected curl's error, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the error took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_response_past_its_timeout_times_out_and_leaves_no_transfer_behind() {
    let addr = serve().expect("local server");
    let client = Client::new().expect("client");
    smol::block_on(async {
        let started = Instant::now();
        let outcome = client
            .get(
                &format!("http://{addr}/size/10/delay/2000"),
                Duration::from_millis(100),
            )
            .await;
        assert_eq!(outcome, Err(GetError::Pump(Error::TimedOut)));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "timed out after {:?}",
            started.elapsed()
        );
        // The cancel reaches the pump thread on its next round; then the multi handle is empty.
        let (pump, deadline) = (
            client.pump().clone(),
            Instant::now() + Duration::from_secs(5),
        );
        while client.running() != 0 {
            assert!(
                Instant::now() < deadline,
                "the timed-out transfer is still in the multi handle"
            );
            pump.turn().await.expect("turn");
        }
        // And the client still works afterwards.
        let response = client
            .get(
                &format!("http://{addr}/size/5/delay/0"),
                Duration::from_secs(10),
            )
            .await
            .expect("a later transfer");
        assert_eq!(response.body, expected_body(5));
    });
}
