//! What one benchmark cell measured, and how `compare` prints and plots it.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// p50 / p99 / max of a latency sample, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Spread {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

impl Spread {
    /// The spread of `sample_ns` (nanoseconds), in microseconds.
    pub fn of_ns(sample_ns: &mut [u64]) -> Spread {
        if sample_ns.is_empty() {
            return Spread::default();
        }
        sample_ns.sort_unstable();
        let at =
            |q: f64| sample_ns[((sample_ns.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
        Spread {
            p50: at(0.50),
            p99: at(0.99),
            max: at(1.0),
        }
    }
}

/// One approach at one N.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    /// [`Approach::name`](crate::peers::Approach::name).
    pub approach: String,
    /// Concurrent waiters.
    pub n: u32,
    /// From arming the ids to the last waiter done, in ms: the measured phase.
    pub wall_ms: f64,
    /// C loop calls during the measured phase.
    pub loop_calls: u64,
    /// Of those, runs that made no id ready. Where each run is caused by an id falling due (a
    /// readiness trigger, a deadline hint), every other run readied at least one id: no more
    /// than one run per batch of ids due together.
    #[serde(default)]
    pub idle_runs: u64,
    /// Loop calls per millisecond of wall time.
    pub calls_per_ms: f64,
    /// Runs that overlapped another run (undefined behaviour in a real C library).
    pub run_overlaps: u64,
    /// Checks that overlapped a run.
    pub check_overlaps: u64,
    /// From "ready in C" to "future saw it".
    pub ready_to_seen_us: Spread,
    /// From the id's deadline to "future saw it".
    pub deadline_to_seen_us: Spread,
    /// From the id's deadline to "ready in C": how late the loop ran after the id fell due.
    #[serde(default)]
    pub deadline_to_ready_us: Spread,
    /// Process CPU time (user + sys) over wall time, in the measured phase.
    pub cpu_cores: f64,
    /// The whole cell, setting up and spawning the waiters included, in ms.
    pub total_ms: f64,
    /// Process CPU time over wall time of the whole cell.
    pub total_cpu_cores: f64,
    /// Peak RSS of the process that ran this cell, in KiB.
    pub peak_rss_kib: u64,
    /// Timer ticks the pump took more than one interval late (ffi-pump only).
    pub late_ticks: Option<u64>,
    /// Steal time of the machine's CPUs in the measured phase, in ms, in whole clock ticks (see
    /// [`Usage::steal`](crate::usage::Usage::steal)); `None` where the kernel does not report it.
    #[serde(default)]
    pub steal_ms: Option<f64>,
    /// Minor page faults in the measured phase (see [`Usage`](crate::usage::Usage)).
    #[serde(default)]
    pub minor_faults: u64,
    /// Context switches in the measured phase.
    #[serde(default)]
    pub context_switches: u64,
    /// How long the waits' polls took, where they were timed (`COMPARE_POLL_TIMES` set; see
    /// [`polls`](crate::polls)).
    #[serde(default)]
    pub poll_us: Option<crate::polls::PollTimes>,
    /// How long after the first possible deadline the ids were all armed (0 as intended).
    #[serde(default)]
    pub arming_late_us: f64,
    /// How long arming all ids took, in µs (before the first deadline, outside the measured phase).
    #[serde(default)]
    pub arming_us: f64,
}

/// One approach with no waiter for a while.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Idle {
    /// [`Approach::name`](crate::peers::Approach::name).
    pub approach: String,
    /// How long nobody waited, in ms.
    pub span_ms: f64,
    /// C loop calls meanwhile.
    pub loop_calls: u64,
    /// Process CPU time over the span.
    pub cpu_cores: f64,
}

/// `kick()` to "waiter saw it".
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kick {
    /// [`Approach::name`](crate::peers::Approach::name).
    pub approach: String,
    /// Kicks measured.
    pub rounds: u32,
    /// Latency spread.
    pub kick_to_seen_us: Spread,
}

/// The markdown table of the scale cells; `skipped` lists (approach, n, why) not run to the end.
pub fn scale_table(cells: &[Cell], skipped: &[(String, u32, String)]) -> String {
    let mut out = String::new();
    out.push_str(
        "| approach | N | wall ms | loop calls | calls/ms | late ticks | run∥run | check∥run | ready→seen p50 / p99 / max µs | deadline→seen p50 / p99 µs | CPU cores | peak RSS MiB |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for c in cells {
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {} | {:.2} | {} | {} | {} | {:.0} / {:.0} / {:.0} | {:.0} / {:.0} | {:.2} | {:.1} |",
            c.approach,
            c.n,
            c.wall_ms,
            c.loop_calls,
            c.calls_per_ms,
            c.late_ticks.map_or_else(|| "–".to_string(), |late| late.to_string()),
            c.run_overlaps,
            c.check_overlaps,
            c.ready_to_seen_us.p50,
            c.ready_to_seen_us.p99,
            c.ready_to_seen_us.max,
            c.deadline_to_seen_us.p50,
            c.deadline_to_seen_us.p99,
            c.cpu_cores,
            c.peak_rss_kib as f64 / 1024.0,
        );
    }
    for (approach, n, why) in skipped {
        let _ = writeln!(
            out,
            "| {approach} | {n} | skipped: {why} | | | | | | | | | |"
        );
    }
    out
}

/// Bytes per waiter: the peak-RSS slope between the smallest and largest N of each approach.
pub fn bytes_per_waiter(cells: &[Cell], approach: &str) -> Option<f64> {
    let mine: Vec<&Cell> = cells.iter().filter(|c| c.approach == approach).collect();
    let small = mine.iter().filter(|c| c.n >= 100).min_by_key(|c| c.n)?;
    let large = mine.iter().max_by_key(|c| c.n)?;
    if large.n <= small.n {
        return None;
    }
    let delta = large.peak_rss_kib as f64 - small.peak_rss_kib as f64;
    Some(delta * 1024.0 / f64::from(large.n - small.n))
}

/// A plot panel: title, left edge, the value plotted, whether its axis is logarithmic.
type Panel = (&'static str, f64, fn(&Cell) -> f64, bool);

/// One color per approach, in [`Approach::ALL`](crate::peers::Approach::ALL) order.
const COLORS: [&str; 18] = [
    "#d62728", "#ff7f0e", "#bcbd22", "#9467bd", "#8c564b", "#1f77b4", "#17becf", "#2ca02c",
    "#e377c2", "#7f7f7f", "#aec7e8", "#98df8a", "#000000", "#ff9896", "#c5b0d5", "#8c6d31",
    "#393b79", "#637939",
];

/// Where the legend's first row is written, below both panels and their axis labels.
const LEGEND_TOP: f64 = 402.0;

/// An SVG with two panels against N (log scale): e2e latency p99 (log scale) and CPU cores.
pub fn plot_svg(cells: &[Cell], approaches: &[&str]) -> String {
    // Tall enough for every row of the legend (five approaches a row).
    let legend_rows = approaches.len().div_ceil(5) as f64;
    let (width, height) = (1000.0, LEGEND_TOP + 20.0 * legend_rows);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    svg.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
    svg.push('\n');
    let ns: Vec<u32> = {
        let mut ns: Vec<u32> = cells.iter().map(|c| c.n).collect();
        ns.sort_unstable();
        ns.dedup();
        ns
    };
    let (n_lo, n_hi) = (
        f64::from(*ns.first().unwrap_or(&1)).log10(),
        f64::from(*ns.last().unwrap_or(&10)).log10().max(1.0),
    );
    let panels: [Panel; 2] = [
        (
            "e2e latency p99, ready in C → future saw it (µs, log)",
            40.0,
            |c| c.ready_to_seen_us.p99.max(1.0),
            true,
        ),
        ("process CPU (cores)", 520.0, |c| c.cpu_cores, false),
    ];
    for (title, left, value, log) in panels {
        let (pw, ph, top) = (400.0, 300.0, 50.0);
        let vals: Vec<f64> = cells.iter().map(value).collect();
        let hi = vals.iter().cloned().fold(f64::MIN, f64::max);
        let (y_lo, y_hi) = if log {
            (0.0, hi.max(10.0).log10().ceil())
        } else {
            (0.0, (hi * 1.1).max(0.1))
        };
        let x = |n: u32| left + 40.0 + (f64::from(n).log10() - n_lo) / (n_hi - n_lo) * pw;
        let y = |v: f64| {
            let v = if log { v.max(1.0).log10() } else { v };
            top + ph - (v - y_lo) / (y_hi - y_lo) * ph
        };
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="30" font-weight="bold">{title}</text>"#,
            left + 40.0
        );
        let _ = writeln!(
            svg,
            r#"<rect x="{}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="grey"/>"#,
            left + 40.0
        );
        for &n in &ns {
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{n}</text>"#,
                x(n),
                top + ph + 18.0
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">N waiters (log)</text>"#,
            left + 40.0 + pw / 2.0,
            top + ph + 36.0
        );
        let ticks: Vec<f64> = if log {
            (0..=y_hi as i32).map(|e| 10f64.powi(e)).collect()
        } else {
            (0..=4).map(|i| y_hi * f64::from(i) / 4.0).collect()
        };
        for t in ticks {
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                left + 36.0,
                y(t) + 4.0,
                if log {
                    format!("{t:.0}")
                } else {
                    format!("{t:.2}")
                }
            );
        }
        for (i, approach) in approaches.iter().enumerate() {
            let mut points: Vec<(f64, f64)> = cells
                .iter()
                .filter(|c| c.approach == *approach)
                .map(|c| (x(c.n), y(value(c))))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let path: Vec<String> = points
                .iter()
                .map(|(px, py)| format!("{px:.1},{py:.1}"))
                .collect();
            let color = COLORS[i % COLORS.len()];
            let _ = writeln!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
                path.join(" ")
            );
            for (px, py) in points {
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{px:.1}" cy="{py:.1}" r="3" fill="{color}"/>"#
                );
            }
        }
    }
    for (i, approach) in approaches.iter().enumerate() {
        let (row, column) = (i / 5, i % 5);
        let lx = 40.0 + (column as f64) * 190.0;
        let ly = LEGEND_TOP + (row as f64) * 20.0;
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            svg,
            r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{color}"/><text x="{}" y="{ly}">{approach}</text>"#,
            ly - 10.0,
            lx + 16.0,
        );
    }
    svg.push_str("</svg>\n");
    svg
}
