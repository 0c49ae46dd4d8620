//! ffi-pump side by side with the approaches it replaces, on the `fake-loop` C fixture.
//!
//! Run the whole matrix (about 2 minutes on 2 cores) with:
//!
//! ```text
//! cargo run --release --bin compare
//! ```
//!
//! Prints a markdown table and one JSON line per measurement, and writes the plot to
//! `benches/compare.svg`. Each cell runs in a child process of its own (`compare --cell NAME N`),
//! so peak RSS is per cell and a cell that cannot finish in 60 s is killed and reported as
//! skipped. `--sizes 1,100` runs fewer sizes.
mod memory;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_loop::FakeLoop;
use ffi_pump_bench::peers::{self, Approach};
use ffi_pump_bench::report::{self, Cell, Idle, Kick, Spread};
use ffi_pump_bench::{collect, usage, Workload, INTERVAL, LOOP_COST, SPREAD, WORKERS};

const SIZES: [u32; 4] = [1, 100, 10_000, 100_000];
/// Completion-driven waits also run at this size (the others are not built for it).
const HUGE: u32 = 1_000_000;
/// Waits measured by `--memory`.
const MEMORY_WAITS: usize = 100_000;
const CELL_LIMIT: Duration = Duration::from_secs(60);
const IDLE_SPAN: Duration = Duration::from_secs(1);
const KICKS: u32 = 500;
const PLOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/compare.svg");

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let approach = |i: usize| {
        args.get(i)
            .and_then(|name| Approach::from_name(name))
            .unwrap_or_else(|| usage_exit())
    };
    match args.first().map(String::as_str) {
        Some("--cell") => {
            let n = args
                .get(2)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| usage_exit());
            println!("{}", to_json(&cell(approach(1), n)));
        }
        Some("--idle") => println!("{}", to_json(&idle(approach(1)))),
        Some("--kick") => println!("{}", to_json(&kick(approach(1)))),
        Some("--memory") => println!("{}", to_json(&memory::measure(MEMORY_WAITS))),
        Some("--sizes") => {
            let sizes: Vec<u32> = args
                .get(1)
                .map(|list| list.split(',').filter_map(|n| n.parse().ok()).collect())
                .unwrap_or_else(|| usage_exit());
            matrix(&sizes);
        }
        Some("--targets") => {
            let repeats = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(5);
            targets(repeats);
        }
        Some("--plot") => {
            let path = args.get(1).unwrap_or_else(|| usage_exit());
            plot_from(path);
        }
        Some("--readiness") => {
            let repeats = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(5);
            readiness(repeats);
        }
        Some("--early") => {
            let repeats = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(3);
            early(repeats);
        }
        Some("--polls") => {
            let repeats = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(3);
            polls(repeats);
        }
        Some("--stalls") => {
            let seconds = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(5);
            stalls(Duration::from_secs(seconds));
        }
        None => matrix(&SIZES),
        Some(_) => usage_exit(),
    }
}

fn usage_exit() -> ! {
    let names: Vec<&str> = Approach::ALL.iter().map(|a| a.name()).collect();
    eprintln!(
        "usage: compare [--sizes N,N,..] | --targets [REPEATS] | --readiness [REPEATS] \
         | --early [REPEATS] | --polls [REPEATS] \
         | --plot OUTPUT_OF_A_RUN | --cell APPROACH N | --idle APPROACH \
         | --kick APPROACH | --memory | --stalls [SECONDS]\n\
         approaches: {}",
        names.join(", ")
    );
    std::process::exit(2);
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("serialisable")
}

/// Child: one approach at one N.
fn cell(approach: Approach, n: u32) -> Cell {
    let workload = Workload::new(n);
    let before = usage::now();
    let started = Instant::now();
    let seen = peers::run(approach, &workload);
    let total = started.elapsed();
    let after = usage::now();
    let fx: &FakeLoop = &workload.fx;
    let deadlines = workload.deadlines();
    let stats = fx.stats();
    let armed = workload.armed().expect("every approach arms the workload");
    let finished = collect::finished().expect("every waiter recorded");
    let mut ready_to_seen: Vec<u64> = (0..n)
        .map(|id| seen[id as usize].saturating_sub(fx.ready_at_ns(id).expect("every id ran")))
        .collect();
    let mut deadline_to_seen: Vec<u64> = (0..n as usize)
        .map(|id| seen[id].saturating_sub(deadlines[id]))
        .collect();
    let mut deadline_to_ready: Vec<u64> = (0..n)
        .map(|id| {
            let ready = fx.ready_at_ns(id).expect("every id ran");
            ready.saturating_sub(deadlines[id as usize])
        })
        .collect();
    if armed.arming_late_us > 0.0 {
        eprintln!(
            "{} at {n}: arming ended {:.0} µs after the first possible deadline",
            approach.name(),
            armed.arming_late_us
        );
    }
    // The measured phase: from the first possible deadline to the last waiter seeing its id.
    let last_seen = seen.iter().copied().max().unwrap_or(armed.at_ns);
    let wall = Duration::from_nanos(last_seen.saturating_sub(armed.at_ns));
    let wall_ms = wall.as_secs_f64() * 1e3;
    let loop_calls = stats.calls - armed.loop_calls;
    Cell {
        approach: approach.name().into(),
        n,
        wall_ms,
        loop_calls,
        idle_runs: stats.idle_runs - armed.idle_runs,
        calls_per_ms: loop_calls as f64 / wall_ms,
        run_overlaps: stats.run_overlaps,
        check_overlaps: stats.check_overlaps,
        ready_to_seen_us: Spread::of_ns(&mut ready_to_seen),
        deadline_to_seen_us: Spread::of_ns(&mut deadline_to_seen),
        deadline_to_ready_us: Spread::of_ns(&mut deadline_to_ready),
        cpu_cores: (finished.cpu - armed.usage.cpu).as_secs_f64() / wall.as_secs_f64(),
        total_ms: total.as_secs_f64() * 1e3,
        total_cpu_cores: (after.cpu - before.cpu).as_secs_f64() / total.as_secs_f64(),
        peak_rss_kib: after.max_rss_kib,
        late_ticks: peers::late_ticks(),
        arming_late_us: armed.arming_late_us,
        arming_us: armed.arming_us,
        minor_faults: finished.minor_faults - armed.usage.minor_faults,
        context_switches: finished.context_switches - armed.usage.context_switches,
        steal_ms: finished
            .steal
            .zip(armed.usage.steal)
            .map(|(end, start)| end.saturating_sub(start).as_secs_f64() * 1e3),
        poll_us: ffi_pump_bench::polls::times(),
    }
}

/// Child: one approach with nobody waiting.
fn idle(approach: Approach) -> Idle {
    let before = usage::now();
    let started = Instant::now();
    let loop_calls = peers::idle(approach, IDLE_SPAN);
    let span = started.elapsed();
    let after = usage::now();
    Idle {
        approach: approach.name().into(),
        span_ms: span.as_secs_f64() * 1e3,
        loop_calls,
        cpu_cores: (after.cpu - before.cpu).as_secs_f64() / span.as_secs_f64(),
    }
}

/// Child: kick latency of an ffi-pump approach.
fn kick(approach: Approach) -> Kick {
    if !approach.is_pump() {
        eprintln!("--kick takes an ffi-pump approach: only ffi-pump has kick()");
        std::process::exit(2);
    }
    let mut latencies = peers::kick_latency(approach, KICKS);
    Kick {
        approach: approach.name().into(),
        rounds: KICKS,
        kick_to_seen_us: Spread::of_ns(&mut latencies),
    }
}

/// Runs `args` as a child of this binary; its JSON line, or why there is none.
fn child<T: serde::de::DeserializeOwned>(args: &[String]) -> Result<T, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) if status.success() => break,
            Some(status) => return Err(format!("exited with {status}")),
            None if started.elapsed() > CELL_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("did not finish in {} s", CELL_LIMIT.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("piped stdout")
        .read_to_string(&mut out)
        .map_err(|e| e.to_string())?;
    serde_json::from_str(out.trim()).map_err(|e| format!("bad output {out:?}: {e}"))
}

fn matrix(sizes: &[u32]) {
    let started = Instant::now();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "# compare: {cores} cores ({cpu}); {WORKERS} worker threads; C loop cost {LOOP_COST:?}; \
         ids ready at random over {SPREAD:?}; interval {INTERVAL:?}\n"
    );

    let mut cells = Vec::new();
    let mut skipped = Vec::new();
    let mut json = Vec::new();
    for approach in Approach::ALL {
        let mut gave_up = false;
        let mut sizes = sizes.to_vec();
        if approach == Approach::PumpCompletions && sizes.last().is_some_and(|&n| n >= 100_000) {
            sizes.push(HUGE);
        }
        for &n in &sizes {
            if gave_up {
                skipped.push((
                    approach.name().to_string(),
                    n,
                    "a smaller N did not finish in 60 s".into(),
                ));
                continue;
            }
            eprintln!("running {} N={n}", approach.name());
            match child::<Cell>(&["--cell".into(), approach.name().into(), n.to_string()]) {
                Ok(c) => {
                    json.push(to_json(&c));
                    cells.push(c);
                }
                Err(why) => {
                    gave_up = true;
                    skipped.push((approach.name().to_string(), n, why));
                }
            }
        }
    }
    println!("## Scale\n\n{}", report::scale_table(&cells, &skipped));

    println!("## Memory\n\n| approach | bytes per waiter (peak-RSS slope, N=100 → largest N) |\n|---|---:|");
    for approach in Approach::ALL {
        match report::bytes_per_waiter(&cells, approach.name()) {
            Some(bytes) => println!("| {} | {bytes:.0} |", approach.name()),
            None => println!("| {} | n/a |", approach.name()),
        }
    }

    println!(
        "\n## Idle ({} s, no waiter)\n\n| approach | loop calls | CPU cores |\n|---|---:|---:|",
        IDLE_SPAN.as_secs()
    );
    for approach in Approach::ALL {
        eprintln!("idle {}", approach.name());
        match child::<Idle>(&["--idle".into(), approach.name().into()]) {
            Ok(idle) => {
                println!(
                    "| {} | {} | {:.4} |",
                    idle.approach, idle.loop_calls, idle.cpu_cores
                );
                json.push(to_json(&idle));
            }
            Err(why) => println!("| {} | failed: {why} | |", approach.name()),
        }
    }

    println!("\n## kick() → waiter saw it ({KICKS} kicks, one pending waiter)\n\n| approach | p50 µs | p99 µs | max µs |\n|---|---:|---:|---:|");
    for approach in [
        Approach::PumpTokio,
        Approach::PumpTokioBroadcast,
        Approach::PumpSmol,
    ] {
        eprintln!("kick {}", approach.name());
        match child::<Kick>(&["--kick".into(), approach.name().into()]) {
            Ok(kick) => {
                let s = kick.kick_to_seen_us;
                println!(
                    "| {} | {:.0} | {:.0} | {:.0} |",
                    kick.approach, s.p50, s.p99, s.max
                );
                json.push(to_json(&kick));
            }
            Err(why) => println!("| {} | failed: {why} | | |", approach.name()),
        }
    }

    eprintln!("memory");
    match child::<memory::Bytes>(&["--memory".into()]) {
        Ok(bytes) => {
            println!(
                "\n## Bytes per pending wait owned by ffi-pump ({MEMORY_WAITS} waits; counting \
                 allocator + `size_of` of the future)\n\n| wait | future (size_of) | heap per wait | total |\n|---|---:|---:|---:|"
            );
            for row in &bytes.rows {
                println!(
                    "| {} | {} | {:.1} | {:.1} |",
                    row.wait,
                    row.future_bytes,
                    row.heap_bytes_per_wait,
                    row.future_bytes as f64 + row.heap_bytes_per_wait
                );
            }
            json.push(to_json(&bytes));
        }
        Err(why) => println!("\nmemory: failed: {why}"),
    }

    let names: Vec<&str> = Approach::ALL.iter().map(|a| a.name()).collect();
    match std::fs::write(PLOT, report::plot_svg(&cells, &names)) {
        Ok(()) => println!("\nPlot: {PLOT}"),
        Err(err) => println!("\nPlot not written to {PLOT}: {err}"),
    }
    println!("\n## JSON lines\n\n```json");
    for line in json {
        println!("{line}");
    }
    println!("```\n\nWhole run: {:.1} s", started.elapsed().as_secs_f64());
}

/// Writes the plot again from the JSON lines a whole run printed (saved output), without running.
fn plot_from(path: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|err| {
        eprintln!("{path}: {err}");
        std::process::exit(2);
    });
    let cells: Vec<Cell> = text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let names: Vec<&str> = Approach::ALL.iter().map(|a| a.name()).collect();
    match std::fs::write(PLOT, report::plot_svg(&cells, &names)) {
        Ok(()) => println!("Plot of {} cells: {PLOT}", cells.len()),
        Err(err) => println!("Plot not written to {PLOT}: {err}"),
    }
}

/// The scale targets, repeated: each repeat runs background-1ms and the ffi-pump rows side by side
/// at N = 10 000 and 100 000, and prints ffi-pump's figures as ratios to the peer's. The CPU of
/// readiness-thread in the same repeat is the floor: what waking N tokio tasks costs at all.
fn targets(repeats: u32) {
    println!(
        "| N | approach | repeat | runs/ms | late ticks | p99 µs (peer) | p99 ratio | CPU cores (peer) | CPU ratio | CPU floor |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let ours = [
        Approach::PumpTokio,
        Approach::PumpSmol,
        Approach::PumpCompletions,
        Approach::SimpleRegistryAsyncIo,
        Approach::SimpleRegistry,
    ];
    for n in [10_000_u32, 100_000] {
        for repeat in 1..=repeats {
            let run =
                |a: Approach| child::<Cell>(&["--cell".into(), a.name().into(), n.to_string()]);
            let peer = match run(Approach::Background1ms) {
                Ok(peer) => peer,
                Err(why) => {
                    println!("| {n} | background-1ms | {repeat} | failed: {why} | | | | | | |");
                    continue;
                }
            };
            let floor = run(Approach::ReadinessThread).map_or_else(
                |why| format!("failed: {why}"),
                |c| format!("{:.2}", c.cpu_cores),
            );
            for approach in ours {
                match run(approach) {
                    Ok(c) => println!(
                        "| {n} | {} | {repeat} | {:.2} | {} | {:.0} ({:.0}) | {:.2} | {:.2} ({:.2}) | {:.2} | {floor} |",
                        c.approach,
                        c.calls_per_ms,
                        c.late_ticks.unwrap_or(0),
                        c.ready_to_seen_us.p99,
                        peer.ready_to_seen_us.p99,
                        c.ready_to_seen_us.p99 / peer.ready_to_seen_us.p99,
                        c.cpu_cores,
                        peer.cpu_cores,
                        c.cpu_cores / peer.cpu_cores,
                    ),
                    Err(why) => println!("| {n} | {} | {repeat} | failed: {why} | | | | | | |", approach.name()),
                }
            }
        }
    }
}

/// The pump-evaluated default (on its own timer, and turned by a tokio interval like the simple
/// registry) and the completion-driven waits beside the simple registry on the pump's timer and
/// lock ([`Approach::SimpleRegistryAsyncIo`], the base of the ratios) and on tokio's interval
/// ([`Approach::SimpleRegistry`]), each cell with its ids armed ahead (every wait in place, as in
/// the other tables) and armed early (right after spawning, the first due at once: ids fall due
/// while the waits are still registering), at N = 1 000, 10 000 and 100 000, side by side in
/// each repeat.
fn early(repeats: u32) {
    const ROWS: [Approach; 5] = [
        Approach::SimpleRegistryAsyncIo,
        Approach::SimpleRegistry,
        Approach::PumpTokioTurned,
        Approach::PumpTokio,
        Approach::PumpCompletions,
    ];
    println!(
        "| N | arming | approach | repeat | runs | deadline→seen p50 / p99 µs | CPU cores | total CPU cores | p99 ratio | CPU ratio |\n\
         |---:|---|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for n in [1_000_u32, 10_000, 100_000] {
        for repeat in 1..=repeats {
            for early in [false, true] {
                let arming = arm_cells(early);
                let cells: Vec<Result<Cell, String>> = ROWS
                    .iter()
                    .map(|a| child::<Cell>(&["--cell".into(), a.name().into(), n.to_string()]))
                    .collect();
                let base = cells[0].as_ref().ok().cloned();
                for (approach, cell) in ROWS.iter().zip(cells) {
                    match cell {
                        Ok(c) => {
                            let (p99, cpu) = base.as_ref().map_or((f64::NAN, f64::NAN), |b| {
                                (
                                    c.deadline_to_seen_us.p99 / b.deadline_to_seen_us.p99,
                                    c.cpu_cores / b.cpu_cores,
                                )
                            });
                            println!(
                                "| {n} | {arming} | {} | {repeat} | {} | {:.0} / {:.0} | {:.3} | {:.3} | {p99:.2} | {cpu:.2} |",
                                c.approach,
                                c.loop_calls,
                                c.deadline_to_seen_us.p50,
                                c.deadline_to_seen_us.p99,
                                c.cpu_cores,
                                c.total_cpu_cores,
                            );
                        }
                        Err(why) => println!(
                            "| {n} | {arming} | {} | {repeat} | failed: {why} | | | | | |",
                            approach.name()
                        ),
                    }
                }
            }
        }
    }
    arm_cells(false);
}

/// The event-driven rows, repeated at N = 10 000: ffi-pump turned by readiness (on tokio and on
/// smol) and by deadline hints, side by side with the readiness-thread baseline in each repeat.
///
/// Each row shows the steal time of its measured phase, and a summary splits the repeats by it: a
/// thread whose virtual CPU the host takes away stalls, whatever runs on it.
fn readiness(repeats: u32) {
    const N: u32 = 10_000;
    const ROWS: [Approach; 6] = [
        Approach::ReadinessThread,
        Approach::PumpReadiness,
        Approach::PumpReadinessTokioReactor,
        Approach::PumpReadinessSmol,
        Approach::PumpReadinessThread,
        Approach::PumpHinted,
    ];
    println!(
        "| approach | repeat | loop runs (idle) | ready→seen p50 / p99 µs | deadline→seen p50 / p99 µs | deadline→ready p99 µs | p99 ratio (ready, deadline) | CPU cores | steal ms |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let run = |a: Approach| child::<Cell>(&["--cell".into(), a.name().into(), N.to_string()]);
    let mut measured: Vec<Cell> = Vec::new();
    let mut kicks: Vec<Kick> = Vec::new();
    for repeat in 1..=repeats {
        for approach in [Approach::PumpTokio, Approach::PumpSmol] {
            match child::<Kick>(&["--kick".into(), approach.name().into()]) {
                Ok(k) => kicks.push(k),
                Err(why) => println!(
                    "| {} | {repeat} | kick failed: {why} | | | | | | |",
                    approach.name()
                ),
            }
        }
        let base = match run(Approach::ReadinessThread) {
            Ok(base) => base,
            Err(why) => {
                println!("| readiness-thread | {repeat} | failed: {why} | | | | | | |");
                continue;
            }
        };
        let cells = ROWS[1..].iter().map(|&a| run(a));
        for c in std::iter::once(Ok(base.clone())).chain(cells) {
            match c {
                Ok(c) => {
                    println!(
                        "| {} | {repeat} | {} ({}) | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} | {:.2}, {:.2} | {:.2} | {} |",
                        c.approach,
                        c.loop_calls,
                        c.idle_runs,
                        c.ready_to_seen_us.p50,
                        c.ready_to_seen_us.p99,
                        c.deadline_to_seen_us.p50,
                        c.deadline_to_seen_us.p99,
                        c.deadline_to_ready_us.p99,
                        c.ready_to_seen_us.p99 / base.ready_to_seen_us.p99,
                        c.deadline_to_seen_us.p99 / base.deadline_to_seen_us.p99,
                        c.cpu_cores,
                        c.steal_ms.map_or("?".into(), |ms| format!("{ms:.0}")),
                    );
                    measured.push(c);
                }
                Err(why) => println!("| ? | {repeat} | failed: {why} | | | | | | |"),
            }
        }
    }
    println!(
        "\n| approach | repeats | deadline→seen p99 µs, median (range) | ≤ 200 µs | without steal | their p99 µs, median (range) | ≤ 200 µs |\n\
         |---|---:|---:|---:|---:|---:|---:|"
    );
    for approach in ROWS {
        let of: Vec<&Cell> = measured
            .iter()
            .filter(|c| c.approach == approach.name())
            .collect();
        let quiet: Vec<&Cell> = of
            .iter()
            .copied()
            .filter(|c| c.steal_ms == Some(0.0))
            .collect();
        let (all, all_met) = p99_summary(&of);
        let (calm, calm_met) = p99_summary(&quiet);
        println!(
            "| {} | {} | {all} | {all_met}/{} | {} | {calm} | {calm_met}/{} |",
            approach.name(),
            of.len(),
            of.len(),
            quiet.len(),
            quiet.len(),
        );
    }
    kick_summary(&kicks);
}

/// `kick()` → waiter p99 of each repeat, by approach.
fn kick_summary(kicks: &[Kick]) {
    println!(
        "\n| approach | repeats | kick→seen p99 µs, median (range) | ≤ 100 µs | each repeat |\n\
         |---|---:|---:|---:|---|"
    );
    for approach in [Approach::PumpTokio, Approach::PumpSmol] {
        let each: Vec<f64> = kicks
            .iter()
            .filter(|k| k.approach == approach.name())
            .map(|k| k.kick_to_seen_us.p99)
            .collect();
        let Some((low, median, high)) = spread_of(&each) else {
            continue;
        };
        let listed: Vec<String> = each.iter().map(|us| format!("{us:.0}")).collect();
        println!(
            "| {} | {} | {median:.0} ({low:.0} – {high:.0}) | {}/{} | {} |",
            approach.name(),
            each.len(),
            each.iter().filter(|&&us| us <= 100.0).count(),
            each.len(),
            listed.join(", "),
        );
    }
}

/// "median (lowest – highest)" of the cells' deadline→seen p99, and how many are ≤ 200 µs.
fn p99_summary(cells: &[&Cell]) -> (String, usize) {
    let p99: Vec<f64> = cells.iter().map(|c| c.deadline_to_seen_us.p99).collect();
    let met = p99.iter().filter(|&&us| us <= 200.0).count();
    match spread_of(&p99) {
        Some((low, median, high)) => (format!("{median:.0} ({low:.0} – {high:.0})"), met),
        None => ("–".into(), met),
    }
}

/// Lowest, median and highest of `values`; `None` if there are none.
fn spread_of(values: &[f64]) -> Option<(f64, f64, f64)> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some((*sorted.first()?, sorted[sorted.len() / 2], *sorted.last()?))
}

/// `--polls`: how long the waits' polls take, ffi-pump's default against the simple design on
/// the same timer and lock, cell after cell (each process times its polls: `COMPARE_POLL_TIMES`);
/// the medians over `repeats`. The simple design's wait locks the map its round holds through the
/// run and every check; ffi-pump's never waits for a pass.
fn polls(repeats: u32) {
    const ROWS: [Approach; 2] = [Approach::SimpleRegistryAsyncIo, Approach::PumpTokio];
    std::env::set_var("COMPARE_POLL_TIMES", "1");
    println!(
        "| N | arming | approach | polls per wait | p50 µs | p99.9 µs | polls > 100 µs | > 1 ms | longest µs |\n\
         |---:|---|---|---:|---:|---:|---:|---:|---:|"
    );
    for n in [1_000_u32, 10_000, 100_000] {
        for early in [false, true] {
            let arming = arm_cells(early);
            let mut times: Vec<Vec<ffi_pump_bench::polls::PollTimes>> =
                vec![Vec::new(); ROWS.len()];
            for _ in 0..repeats {
                for (row, approach) in ROWS.iter().enumerate() {
                    let cell =
                        child::<Cell>(&["--cell".into(), approach.name().into(), n.to_string()]);
                    match cell.map(|c| c.poll_us) {
                        Ok(Some(t)) => times[row].push(t),
                        Ok(None) => eprintln!("{}: no poll timed", approach.name()),
                        Err(why) => eprintln!("{} at {n}: failed: {why}", approach.name()),
                    }
                }
            }
            for (approach, times) in ROWS.iter().zip(times) {
                let median = |f: &dyn Fn(&ffi_pump_bench::polls::PollTimes) -> f64| {
                    let values: Vec<f64> = times.iter().map(f).collect();
                    spread_of(&values).map_or(f64::NAN, |(_, median, _)| median)
                };
                println!(
                    "| {n} | {arming} | {} | {:.2} | {:.1} | {:.1} | {:.0} | {:.0} | {:.0} |",
                    approach.name(),
                    median(&|t| t.polls as f64 / f64::from(n)),
                    median(&|t| t.p50_us),
                    median(&|t| t.p999_us),
                    median(&|t| t.over_100us as f64),
                    median(&|t| t.over_1ms as f64),
                    median(&|t| t.longest_us),
                );
            }
        }
    }
    arm_cells(false);
}

/// Has the cells started from now on arm their ids early (`early`) or ahead, as
/// `ffi_pump_bench::arms_early` reads it; the arming's name.
fn arm_cells(early: bool) -> &'static str {
    if early {
        std::env::set_var("COMPARE_ARMING", "early");
        "early"
    } else {
        std::env::remove_var("COMPARE_ARMING");
        "ahead"
    }
}

/// `--stalls`: the gaps a spinning thread per worker sees on this machine, with nothing else
/// running.
fn stalls(span: Duration) {
    let seen = ffi_pump_bench::stalls::measure(WORKERS, span);
    println!(
        "| thread | seconds | gaps > 200 µs | > 1 ms | > 2 ms | longest µs | ms of its > 1 ms gaps the other thread was stopped too |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (thread, s) in seen.iter().enumerate() {
        println!(
            "| {thread} | {:.1} | {} | {} | {} | {:.0} | {:.2} |",
            s.seconds, s.over_200us, s.over_1ms, s.over_2ms, s.max_us, s.shared_ms
        );
    }
    for s in &seen {
        println!("{}", to_json(s));
    }
}
