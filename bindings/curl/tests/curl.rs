//! libcurl's multi interface driven by ffi-pump (the `curl` crate, libcurl built from source).

use std::sync::Arc;
use std::time::{Duration, Instant};

mod server;

use ffi_pump::Error;
use ffi_pump_curl::{Client, GetError, Schedule};
use server::{checksum, expected_body, has_received, serve};

#[test]
fn every_body_arrives_intact_through_curls_sockets() {
    let client = every_body_arrives_intact(Schedule::Sockets);
    // At least one socket_action per transfer (its connect), and not one per round: a round
    // for a call or a kick with no socket ready calls nothing.
    assert!(client.runs() >= 40, "{} runs", client.runs());
}

#[test]
fn every_body_arrives_intact_with_perform() {
    let client = every_body_arrives_intact(Schedule::CurlTimeout);
    // One perform() per round, whatever the number of transfers in flight: read between two
    // rounds (a round in progress has counted its perform() and not yet itself).
    let started = std::time::Instant::now();
    loop {
        let (rounds, runs) = (client.pump().stats().rounds, client.runs());
        if runs == rounds && client.pump().stats().rounds == rounds {
            break;
        }
        assert!(
            runs <= rounds + 1,
            "{runs} perform() calls in {rounds} rounds"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{runs} runs, {rounds} rounds"
        );
        std::thread::yield_now();
    }
}

/// 40 transfers of 0 B to 300 kB, some held 10 or 20 ms by the server, each checked byte for byte.
fn every_body_arrives_intact(schedule: Schedule) -> Arc<Client> {
    let addr = serve().expect("local server");
    let client = Arc::new(Client::with_schedule(schedule).expect("client"));
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
    assert_eq!(client.running(), 0);
    client
}

#[test]
fn only_http_and_https_urls_without_nul_are_fetched() {
    // A file the client could read if it took a `file://` URL, as libcurl would.
    let path = std::env::temp_dir().join(format!("ffi-pump-curl-scheme-{}", std::process::id()));
    std::fs::write(&path, b"secret").expect("temp file");
    let client = Client::new().expect("client");
    for url in [
        format!("file://{}", path.display()),
        format!("FILE://{}", path.display()),
        "ftp://127.0.0.1:1/".to_string(),
        "127.0.0.1:1/".to_string(),
        " http://127.0.0.1:1/".to_string(),
        // Cut there by libcurl's C string, which said "[75] Unknown error".
        "http://127.0.0.1:1/\0x".to_string(),
    ] {
        let outcome = smol::block_on(client.get(&url, Duration::from_secs(10)));
        assert_eq!(outcome, Err(GetError::Url(url)));
    }
    let _ = std::fs::remove_file(&path);
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

/// Raises this process's soft limit on open descriptors to `at_least` (within the hard limit).
#[cfg(unix)]
fn allow_descriptors(at_least: u64) {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    assert!(
        hard >= at_least,
        "this machine allows {hard} open descriptors per process; the test needs {at_least}"
    );
    if limit.current.is_some_and(|soft| soft < at_least) {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(at_least),
                maximum: limit.maximum,
            },
        )
        .expect("raise the soft limit on open descriptors");
    }
}

// Unix: descriptor numbers past `select()`'s 1 024 (Windows sockets are handles, not numbers).
#[cfg(unix)]
#[test]
fn eleven_hundred_concurrent_transfers_succeed_on_descriptors_past_1024() {
    const TRANSFERS: u64 = 1_100;
    // The client's and the server's sockets, 1 024 placeholders, and some spare.
    allow_descriptors(2 * TRANSFERS + 1_024 + 512);
    // Take the descriptors below 1 024 first, so every socket of the transfers lies past it
    // (where select() cannot go: a libcurl built without poll() fails those connections).
    let placeholders: Vec<_> = (0..1_024)
        .map_while(|_| std::fs::File::open("/dev/null").ok())
        .collect();
    let addr = serve().expect("local server");
    let client = Arc::new(Client::new().expect("client"));
    let outcomes = smol::block_on(async {
        let tasks: Vec<_> = (0..TRANSFERS)
            .map(|i| {
                let client = client.clone();
                // Held by the server long enough for all to be open at once.
                let url = format!("http://{addr}/size/100/delay/1000/id/{}", 1_000_000 + i);
                smol::spawn(async move { client.get(&url, Duration::from_secs(60)).await })
            })
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await);
        }
        outcomes
    });
    drop(placeholders);
    assert_eq!(client.refused_watches(), 0);
    let failed: Vec<_> = outcomes.iter().filter(|o| o.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {TRANSFERS} failed, e.g. {:?}",
        failed.len(),
        failed.first()
    );
    for outcome in outcomes {
        assert_eq!(outcome.expect("checked above").body, expected_body(100));
    }
}

#[test]
fn while_every_transfer_waits_on_the_server_curl_is_not_run() {
    const TRANSFERS: u64 = 50;
    let addr = serve().expect("local server");
    let client = Arc::new(Client::new().expect("client"));
    smol::block_on(async {
        let ids: Vec<u64> = (0..TRANSFERS).map(|i| 2_000_000 + i).collect();
        let tasks: Vec<_> = ids
            .iter()
            .map(|&id| {
                let client = client.clone();
                let url = format!("http://{addr}/size/10/delay/3000/id/{id}");
                smol::spawn(async move { client.get(&url, Duration::from_secs(10)).await })
            })
            .collect();
        // Every request sent and read by the server, which now holds them for 3 s.
        let started = Instant::now();
        while !ids.iter().all(|&id| has_received(id)) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "requests never arrived"
            );
            smol::Timer::after(Duration::from_millis(1)).await;
        }
        // curl may still be told the last request went out (one round of socket changes).
        smol::Timer::after(Duration::from_millis(50)).await;
        let (runs, rounds) = (client.runs(), client.pump().stats().rounds);
        smol::Timer::after(Duration::from_millis(500)).await;
        let waited = started.elapsed();
        let (runs_later, rounds_later) = (client.runs(), client.pump().stats().rounds);
        assert!(
            waited < Duration::from_millis(2_500),
            "the window ran past the server's hold ({waited:?}): the machine is too slow to tell"
        );
        assert_eq!(
            (runs_later - runs, rounds_later - rounds),
            (0, 0),
            "curl runs and pump rounds while every transfer waited on the server"
        );
        for task in tasks {
            assert_eq!(task.await.expect("transfer").body, expected_body(10));
        }
    });
}

/// Found by a hostile probe of the bindings: `Schedule::Every(Duration::MAX)` added the period
/// to the clock and the loop's thread panicked (overflow), closing the client's pump for good.
/// Such a period never comes: a transfer left to it times out, and the client goes on.
#[test]
fn a_period_past_the_clocks_range_never_comes_and_breaks_nothing() {
    let addr = serve().expect("local server");
    let client = Client::with_schedule(Schedule::Every(Duration::MAX)).expect("client");
    let url = format!("http://{addr}/size/10/delay/0");
    let outcome = smol::block_on(client.get(&url, Duration::from_millis(200)));
    assert!(
        matches!(outcome, Err(GetError::Pump(Error::TimedOut)) | Ok(_)),
        "{outcome:?}"
    );
    assert!(
        !client.pump().stats().panicked,
        "the loop's thread panicked"
    );
}
