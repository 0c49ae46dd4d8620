//! libcurl clients side by side against a local HTTP server in another process: isahc (curl's
//! multi handle on its own agent thread, woken by `polling`), the curl binding polled with
//! `perform()` at most 1 ms apart (the interval client), the curl binding driven by curl's
//! socket API through ffi-pump (the socket-driven client), and the floor any async wrapper
//! stands on: a bare client — one thread, no async runtime, libcurl's socket API on a
//! level-triggered `polling::Poller`, every request added at once (`bare`) — and the same loop on
//! a thread of its own, handed its requests by tokio tasks (a queue and the poller's
//! notification) and answering each through a oneshot channel, with no cancel and no close: the
//! least an async wrapper writes by hand (`bare-tasks`).
//!
//! ```text
//! cargo run --release -p ffi-pump-bench --bin http [REPEATS]
//! ```
//!
//! The server (`http --server`, tokio, one thread) answers `GET /delay/{ms}/size/{bytes}` after
//! `ms` with `bytes` bytes and an `x-written-at` header: the wall-clock moment it wrote the
//! response. Each client runs in a process of its own (`http --client NAME N DELAY SIZE PORT`),
//! measured alone: wall time, CPU of the client process (getrusage), latency from "server wrote
//! the response" to "task has the body" (p50 / p99 / max), calls into curl's loop (ours only) and
//! errors; with `HTTP_THREADS` set, also each thread's CPU time over the cell, on stderr. Cells:
//! N = 100, 1 000, 5 000 requests held 1 s (long-poll), and a burst of 2 000 × 64 KiB with no
//! delay. In every repeat the clients run one after another, in an order rotated per repeat; the
//! table gives medians over the repeats and ratios to isahc, to `bare` and to `bare-tasks`.
//!
//! libcurl must be built with poll() (`CFLAGS=-DHAVE_POLL=1`, set by the workspace's
//! `.cargo/config.toml`): with select() every connection past descriptor 1 023 fails.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ffi_pump_bench::report::Spread;
use ffi_pump_bench::usage;
use serde::{Deserialize, Serialize};

const CLIENTS: [&str; 5] = ["isahc", "interval", "sockets", "bare", "bare-tasks"];
/// (requests, server delay ms, body bytes).
const CELLS: [(usize, u64, usize); 4] = [
    (100, 1_000, 100),
    (1_000, 1_000, 100),
    (5_000, 1_000, 100),
    (2_000, 0, 65_536),
];

/// One client's run of one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Run {
    client: String,
    requests: usize,
    delay_ms: u64,
    size: usize,
    wall_ms: f64,
    /// CPU time of the client process over the cell.
    cpu_ms: f64,
    cpu_cores: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// Calls into curl's loop (perform or socket_action); `None` for isahc, which does not say.
    runs: Option<u64>,
    errors: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    raise_descriptor_limit();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--server") => serve(),
        Some("--client") => {
            let run = client(
                &args[1],
                args[2].parse()?,
                args[3].parse()?,
                args[4].parse()?,
                args[5].parse()?,
            )?;
            println!("{}", serde_json::to_string(&run)?);
            Ok(())
        }
        repeats => orchestrate(repeats.and_then(|r| r.parse().ok()).unwrap_or(3)),
    }
}

/// The soft limit on open descriptors up to the hard one: 5 000 connections need 5 000 in the
/// client and as many in the server.
fn raise_descriptor_limit() {
    // SAFETY: getrlimit/setrlimit with a valid resource and a valid, writable rlimit.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The server: prints its port, then answers until its stdin closes.
fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // A backlog as deep as the kernel allows (somaxconn): 5 000 clients connect at once, and
        // a SYN dropped from a full queue is retried only after 1 s.
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(([127, 0, 0, 1], 0).into())?;
        let listener = socket.listen(65_535)?;
        println!("{}", listener.local_addr()?.port());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(async move {
                    let _ = answer(stream).await;
                });
            }
        });
        // The orchestrator closes our stdin when it is done (or dies).
        tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        })
        .await?;
        Ok(())
    })
}

/// Answers the requests of one connection (keep-alive).
async fn answer(stream: tokio::net::TcpStream) -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let _ = stream.set_nodelay(true);
    let mut stream = tokio::io::BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if stream.read_line(&mut request_line).await? == 0 {
            return Ok(());
        }
        loop {
            let mut header = String::new();
            if stream.read_line(&mut header).await? == 0 {
                return Ok(());
            }
            if header == "\r\n" {
                break;
            }
        }
        let path = request_line.split_whitespace().nth(1).unwrap_or("/");
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (delay, size) = match parts.as_slice() {
            ["delay", delay, "size", size] => {
                (delay.parse().unwrap_or(0), size.parse().unwrap_or(0))
            }
            _ => (0, 0),
        };
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nX-Written-At: {}\r\n\r\n",
            now_ns()
        )
        .into_bytes();
        response.resize(response.len() + size, b'x');
        stream.get_mut().write_all(&response).await?;
    }
}

/// One client process: `requests` concurrent GETs, measured.
fn client(
    name: &str,
    requests: usize,
    delay_ms: u64,
    size: usize,
    port: u16,
) -> Result<Run, Box<dyn std::error::Error>> {
    let url = format!("http://127.0.0.1:{port}/delay/{delay_ms}/size/{size}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let timeout = Duration::from_secs(60);
    let (outcomes, wall, cpu, runs) = match name {
        "isahc" => {
            use isahc::config::Configurable;
            let client = Arc::new(isahc::HttpClient::builder().timeout(timeout).build()?);
            let (outcomes, wall, cpu) = runtime.block_on(measure(requests, move || {
                let (client, url) = (client.clone(), url.clone());
                async move {
                    use isahc::AsyncReadResponseExt;
                    let mut response = client.get_async(url).await.map_err(|e| e.to_string())?;
                    let written = response
                        .headers()
                        .get("x-written-at")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u128>().ok());
                    let body = response.bytes().await.map_err(|e| e.to_string())?;
                    Ok((written, body.len()))
                }
            }));
            (outcomes, wall, cpu, None)
        }
        "interval" | "sockets" => {
            let schedule = match name {
                "interval" => ffi_pump_curl::Schedule::CurlTimeout,
                _ => ffi_pump_curl::Schedule::Sockets,
            };
            let client = Arc::new(ffi_pump_curl::Client::with_schedule(schedule)?);
            let counter = client.clone();
            let before = counter.runs();
            let (outcomes, wall, cpu) = runtime.block_on(measure(requests, move || {
                let (client, url) = (client.clone(), url.clone());
                async move {
                    let response = client
                        .get(&url, timeout)
                        .await
                        .map_err(|e| format!("{e:?}"))?;
                    let written = response.header("x-written-at").and_then(|v| v.parse().ok());
                    Ok((written, response.body.len()))
                }
            }));
            (outcomes, wall, cpu, Some(counter.runs() - before))
        }
        "bare" => {
            let (outcomes, wall, cpu, calls) = bare::client(requests, &url, timeout)?;
            (outcomes, wall, cpu, Some(calls))
        }
        "bare-tasks" => {
            let wrapper = Arc::new(bare::Wrapper::start(timeout)?);
            let counter = wrapper.clone();
            let (outcomes, wall, cpu) = runtime.block_on(measure(requests, move || {
                let (wrapper, url) = (wrapper.clone(), url.clone());
                async move { wrapper.get(url).await }
            }));
            (outcomes, wall, cpu, Some(counter.calls()))
        }
        other => return Err(format!("no client {other}").into()),
    };
    let mut errors = 0;
    let mut latencies_ns: Vec<u64> = Vec::with_capacity(outcomes.len());
    for outcome in &outcomes {
        match outcome {
            Ok((Some(written), len, seen)) if *len == size => {
                latencies_ns.push(u64::try_from(seen.saturating_sub(*written)).unwrap_or(u64::MAX))
            }
            Ok(_) => errors += 1,
            Err(err) => {
                if errors == 0 {
                    eprintln!("{name}: {err}");
                }
                errors += 1
            }
        }
    }
    // No body arrived whole: no latency to tell (the errors column says why).
    let spread_ms = match latencies_ns.is_empty() {
        true => [f64::NAN; 3],
        false => {
            let us = Spread::of_ns(&mut latencies_ns);
            [us.p50 / 1e3, us.p99 / 1e3, us.max / 1e3]
        }
    };
    Ok(Run {
        client: name.to_string(),
        requests,
        delay_ms,
        size,
        wall_ms: wall.as_secs_f64() * 1e3,
        cpu_ms: cpu.as_secs_f64() * 1e3,
        cpu_cores: cpu.as_secs_f64() / wall.as_secs_f64(),
        p50_ms: spread_ms[0],
        p99_ms: spread_ms[1],
        max_ms: spread_ms[2],
        runs,
        errors,
    })
}

type Outcome = Result<(Option<u128>, usize, u128), String>;

/// Spawns `requests` tasks, each one request; their outcomes with the moment each task had its
/// body, the wall time and the process's CPU time over the whole.
async fn measure<F, Fut>(requests: usize, request: F) -> (Vec<Outcome>, Duration, Duration)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(Option<u128>, usize), String>> + Send + 'static,
{
    let cpu_before = usage::now().cpu;
    let threads_before = usage::by_thread();
    let started = Instant::now();
    let tasks: Vec<_> = (0..requests)
        .map(|_| {
            let request = request();
            tokio::spawn(async move {
                let outcome = request.await;
                let seen = now_ns();
                outcome.map(|(written, len)| (written, len, seen))
            })
        })
        .collect();
    let mut outcomes = Vec::with_capacity(requests);
    for task in tasks {
        outcomes.push(task.await.unwrap_or_else(|e| Err(e.to_string())));
    }
    let wall = started.elapsed();
    let cpu = usage::now().cpu - cpu_before;
    report_threads(&threads_before);
    (outcomes, wall, cpu)
}

/// With `HTTP_THREADS` set, the CPU each thread (by name) used since `before`, on stderr.
fn report_threads(before: &std::collections::BTreeMap<String, u64>) {
    if std::env::var_os("HTTP_THREADS").is_none() {
        return;
    }
    for (name, ns) in usage::by_thread() {
        let used = ns.saturating_sub(before.get(&name).copied().unwrap_or(0));
        eprintln!("thread {name}: {:.1} ms", used as f64 / 1e6);
    }
}

fn orchestrate(repeats: usize) -> Result<(), Box<dyn std::error::Error>> {
    let exe = std::env::current_exe()?;
    let mut server = Command::new(&exe)
        .arg("--server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut port = String::new();
    BufReader::new(server.stdout.take().ok_or("server stdout")?).read_line(&mut port)?;
    let port: u16 = port.trim().parse()?;
    eprintln!("server on 127.0.0.1:{port}; {repeats} repeats");
    let mut runs: Vec<Run> = Vec::new();
    for repeat in 0..repeats {
        for &(requests, delay, size) in &CELLS {
            for i in 0..CLIENTS.len() {
                let name = CLIENTS[(i + repeat) % CLIENTS.len()];
                let output = Command::new(&exe)
                    .args(["--client", name])
                    .args([requests.to_string(), delay.to_string(), size.to_string()])
                    .arg(port.to_string())
                    .stderr(Stdio::inherit())
                    .output()?;
                let line = String::from_utf8_lossy(&output.stdout);
                let run: Run = serde_json::from_str(line.trim())
                    .map_err(|e| format!("{name}: {e}: {line}"))?;
                println!("{}", serde_json::to_string(&run)?);
                runs.push(run);
            }
        }
    }
    drop(server.stdin.take());
    let _ = server.wait();
    report(&runs);
    Ok(())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn report(runs: &[Run]) {
    println!(
        "\n| cell | client | repeats | errors | wall ms | client CPU ms | CPU ms / isahc | CPU ms / bare | CPU ms / bare-tasks | CPU cores | p50 ms | p99 ms | p99 / isahc | p99 / bare | p99 / bare-tasks | max ms | runs of curl |"
    );
    println!(
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for &(requests, delay, size) in &CELLS {
        let cell: Vec<&Run> = runs
            .iter()
            .filter(|r| r.requests == requests && r.delay_ms == delay && r.size == size)
            .collect();
        let of = |client: &str, field: fn(&Run) -> f64| {
            median(
                cell.iter()
                    .filter(|r| r.client == client)
                    .map(|r| field(r))
                    .collect(),
            )
        };
        let label = match delay {
            0 => format!("burst {requests} × {} KiB", size / 1024),
            _ => format!("N = {requests}, held {delay} ms"),
        };
        for client in CLIENTS {
            let mine: Vec<&&Run> = cell.iter().filter(|r| r.client == client).collect();
            let errors: usize = mine.iter().map(|r| r.errors).sum();
            let runs = median(
                mine.iter()
                    .filter_map(|r| r.runs)
                    .map(|r| r as f64)
                    .collect(),
            );
            println!(
                "| {label} | {client} | {} | {errors} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.3} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.1} | {} |",
                mine.len(),
                of(client, |r| r.wall_ms),
                of(client, |r| r.cpu_ms),
                of(client, |r| r.cpu_ms) / of("isahc", |r| r.cpu_ms),
                of(client, |r| r.cpu_ms) / of("bare", |r| r.cpu_ms),
                of(client, |r| r.cpu_ms) / of("bare-tasks", |r| r.cpu_ms),
                of(client, |r| r.cpu_cores),
                of(client, |r| r.p50_ms),
                of(client, |r| r.p99_ms),
                of(client, |r| r.p99_ms) / of("isahc", |r| r.p99_ms),
                of(client, |r| r.p99_ms) / of("bare", |r| r.p99_ms),
                of(client, |r| r.p99_ms) / of("bare-tasks", |r| r.p99_ms),
                of(client, |r| r.max_ms),
                if runs.is_nan() { "—".to_string() } else { format!("{runs:.0}") },
            );
        }
    }
}

/// The bare client: one thread, no async runtime, libcurl's socket API on a level-triggered
/// `polling::Poller`, every request added at once; what an async wrapper costs is measured
/// against it.
mod bare {
    use std::collections::{HashMap, HashSet};
    use std::os::fd::BorrowedFd;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use curl::easy::{Easy2, Handler, WriteError};
    use curl::multi::{Easy2Handle, Events, Multi};
    use polling::{Event, PollMode, Poller};
    use tokio::sync::oneshot;

    use super::{now_ns, usage, Outcome};

    /// What a transfer received: the server's `x-written-at` and the body, kept as every other
    /// client keeps it (the binding into a `Vec`, isahc's `bytes()`).
    #[derive(Default)]
    struct Received {
        written: Option<u128>,
        body: Vec<u8>,
    }

    impl Handler for Received {
        fn write(&mut self, data: &[u8]) -> Result<usize, WriteError> {
            self.body.extend_from_slice(data);
            Ok(data.len())
        }

        fn header(&mut self, data: &[u8]) -> bool {
            let line = String::from_utf8_lossy(data);
            if let Some((name, value)) = line.split_once(':') {
                if name.trim().eq_ignore_ascii_case("x-written-at") {
                    self.written = value.trim().parse().ok();
                }
            }
            true
        }
    }

    /// The sockets curl watches, in the poller.
    struct Watched {
        poller: Poller,
        added: Mutex<HashSet<curl::multi::Socket>>,
    }

    impl Watched {
        fn socket(&self, socket: curl::multi::Socket, events: curl::multi::SocketEvents) {
            let key = socket as usize;
            let mut added = self.added.lock().unwrap();
            // SAFETY: curl holds `socket` open for the call, and reports CURL_POLL_REMOVE before
            // it closes it: it is deleted from the poller first.
            let fd = unsafe { BorrowedFd::borrow_raw(socket) };
            if events.remove() {
                if added.remove(&socket) {
                    let _ = self.poller.delete(fd);
                }
                return;
            }
            let event = Event::new(key, events.input(), events.output());
            let _ = match added.insert(socket) {
                // SAFETY: as above.
                true => unsafe { self.poller.add_with_mode(socket, event, PollMode::Level) },
                false => self.poller.modify_with_mode(fd, event, PollMode::Level),
            };
        }
    }

    /// The multi handle, the poller its sockets are watched in and curl's deadline: the loop both
    /// bare clients turn.
    struct Loop {
        watched: Arc<Watched>,
        deadline: Arc<Mutex<Option<Instant>>>,
        multi: Multi,
        events: polling::Events,
        calls: u64,
    }

    impl Loop {
        fn new(watched: Arc<Watched>) -> Result<Loop, Box<dyn std::error::Error>> {
            let deadline = Arc::new(Mutex::new(None::<Instant>));
            let mut multi = Multi::new();
            let on_socket = watched.clone();
            multi.socket_function(move |socket, events, _| on_socket.socket(socket, events))?;
            let timer = deadline.clone();
            multi.timer_function(move |after| {
                *timer.lock().unwrap() = after.map(|after| Instant::now() + after);
                true
            })?;
            Ok(Loop {
                watched,
                deadline,
                multi,
                events: polling::Events::new(),
                calls: 0,
            })
        }

        fn add(
            &self,
            url: &str,
            timeout: Duration,
            token: usize,
        ) -> Result<Easy2Handle<Received>, String> {
            let mut easy = Easy2::new(Received::default());
            easy.url(url).map_err(|e| e.to_string())?;
            easy.timeout(timeout).map_err(|e| e.to_string())?;
            let mut handle = self.multi.add2(easy).map_err(|e| e.to_string())?;
            handle.set_token(token).map_err(|e| e.to_string())?;
            Ok(handle)
        }

        /// Sleeps until a socket is ready or curl's deadline (or a notification), drives curl
        /// for what happened, and hands each finished transfer's token and result to `finished`.
        fn turn(
            &mut self,
            mut finished: impl FnMut(&Multi, usize, Result<(), curl::Error>),
        ) -> std::io::Result<()> {
            let due = *self.deadline.lock().unwrap();
            let wait = due.map(|at| at.saturating_duration_since(Instant::now()));
            self.events.clear();
            self.watched.poller.wait(&mut self.events, wait)?;
            for event in self.events.iter() {
                let mut what = Events::new();
                what.input(event.readable).output(event.writable);
                self.calls += 1;
                let _ = self.multi.action(event.key as curl::multi::Socket, &what);
            }
            if self
                .deadline
                .lock()
                .unwrap()
                .is_some_and(|at| at <= Instant::now())
            {
                self.calls += 1;
                let _ = self.multi.timeout();
            }
            let mut done = Vec::new();
            self.multi.messages(|message| {
                if let (Ok(token), Some(result)) = (message.token(), message.result()) {
                    done.push((token, result));
                }
            });
            for (token, result) in done {
                finished(&self.multi, token, result);
            }
            Ok(())
        }
    }

    /// What a finished transfer gave: its `x-written-at`, its body's length, when it was seen.
    fn outcome(
        multi: &Multi,
        handle: Easy2Handle<Received>,
        result: Result<(), curl::Error>,
    ) -> Outcome {
        let seen = now_ns();
        let mut easy = multi.remove2(handle).map_err(|e| e.to_string())?;
        let body = std::mem::take(&mut easy.get_mut().body);
        result.map_err(|err| err.to_string())?;
        Ok((easy.get_ref().written, body.len(), seen))
    }

    /// The outcomes, wall and CPU time, and calls into curl of one client's run.
    type Measured = (Vec<Outcome>, Duration, Duration, u64);

    /// `requests` GETs of `url` at once, measured.
    pub(super) fn client(
        requests: usize,
        url: &str,
        timeout: Duration,
    ) -> Result<Measured, Box<dyn std::error::Error>> {
        let cpu_before = usage::now().cpu;
        let threads_before = usage::by_thread();
        let started = Instant::now();
        let mut turned = Loop::new(Arc::new(Watched {
            poller: Poller::new()?,
            added: Mutex::new(HashSet::new()),
        }))?;
        let mut handles = Vec::with_capacity(requests);
        for token in 0..requests {
            handles.push(Some(turned.add(url, timeout, token)?));
        }
        let mut outcomes: Vec<Option<Outcome>> = (0..requests).map(|_| None).collect();
        let mut left = requests;
        while left > 0 {
            turned.turn(|multi, token, result| {
                if let Some(handle) = handles[token].take() {
                    outcomes[token] = Some(outcome(multi, handle, result));
                    left -= 1;
                }
            })?;
        }
        let outcomes = outcomes
            .into_iter()
            .map(|o| o.unwrap_or(Err("lost".into())))
            .collect();
        super::report_threads(&threads_before);
        Ok((
            outcomes,
            started.elapsed(),
            usage::now().cpu - cpu_before,
            turned.calls,
        ))
    }

    /// A request handed to the wrapper's thread, and where its outcome goes.
    type Asked = (String, oneshot::Sender<Outcome>);

    /// The hand-written async wrapper (`bare-tasks`): the bare loop on a thread of its own,
    /// tasks handing it their requests through a queue and a poller notification, each answered
    /// through a oneshot channel. No cancel, no timeout of its own, no close but the end of the
    /// process: the least an async wrapper of curl's socket API does.
    pub(super) struct Wrapper {
        watched: Arc<Watched>,
        asked: Arc<Mutex<Vec<Asked>>>,
        calls: Arc<AtomicU64>,
    }

    impl Wrapper {
        pub(super) fn start(timeout: Duration) -> Result<Wrapper, Box<dyn std::error::Error>> {
            let watched = Arc::new(Watched {
                poller: Poller::new()?,
                added: Mutex::new(HashSet::new()),
            });
            let asked: Arc<Mutex<Vec<Asked>>> = Arc::default();
            let calls = Arc::new(AtomicU64::new(0));
            let (on_thread, queue, counted) = (watched.clone(), asked.clone(), calls.clone());
            std::thread::Builder::new()
                .name("bare-loop".into())
                .spawn(move || {
                    let Ok(mut turned) = Loop::new(on_thread) else {
                        return;
                    };
                    let mut open: HashMap<usize, (Easy2Handle<Received>, oneshot::Sender<_>)> =
                        HashMap::new();
                    let mut next_token = 0;
                    loop {
                        for (url, answer) in std::mem::take(&mut *queue.lock().unwrap()) {
                            match turned.add(&url, timeout, next_token) {
                                Ok(handle) => drop(open.insert(next_token, (handle, answer))),
                                Err(err) => drop(answer.send(Err(err))),
                            }
                            next_token += 1;
                        }
                        let turn = turned.turn(|multi, token, result| {
                            if let Some((handle, answer)) = open.remove(&token) {
                                let _ = answer.send(outcome(multi, handle, result));
                            }
                        });
                        counted.store(turned.calls, Ordering::Relaxed);
                        if turn.is_err() {
                            return;
                        }
                    }
                })?;
            Ok(Wrapper {
                watched,
                asked,
                calls,
            })
        }

        /// GETs `url` on the wrapper's thread: the server's `x-written-at` and the body's length.
        pub(super) async fn get(&self, url: String) -> Result<(Option<u128>, usize), String> {
            let (answer, outcome) = oneshot::channel();
            self.asked.lock().unwrap().push((url, answer));
            self.watched.poller.notify().map_err(|e| e.to_string())?;
            let (written, len, _) = outcome.await.map_err(|_| "the loop's thread ended")??;
            Ok((written, len))
        }

        /// Calls into curl so far.
        pub(super) fn calls(&self) -> u64 {
            self.calls.load(Ordering::Relaxed)
        }
    }
}
