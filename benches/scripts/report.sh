#!/usr/bin/env bash
# Regenerates every table of BENCHMARKS.md's "Current figures", one command per table (the same
# commands the page gives beside each), each table's whole output kept in OUT/NAME.txt:
#
#     benches/scripts/report.sh [OUT]          (default: target/report; ~7½ min on 2 cores)
#
# Run it on an otherwise idle machine: the figures are CPU time and tail latency.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-target/report}
mkdir -p "$out"
cargo build --release -q -p ffi-pump-bench --bins
run() {
    local name=$1
    shift
    echo "== $name: $* ($(date -u +%H:%M:%S) UTC)"
    "$@" > "$out/$name.txt" 2>&1
}
run matrix target/release/compare # also redraws benches/compare.svg
run targets target/release/compare --targets 5
run early target/release/compare --early 5
run polls target/release/compare --polls 5
run readiness target/release/compare --readiness 10
run http target/release/http 5
run tcl cargo run --release -q -p ffi-pump-tcl --example tcl_timers 5
run uv cargo run --release -q -p ffi-pump-uv --example uv_timers
run glib cargo run --release -q -p ffi-pump-glib --example glib
run turn cargo bench -q -p ffi-pump-bench --bench turn
# The default pump against the simple design, cells alternated (BENCHMARKS.md, "What stands").
alternate() {
    for n in 1000 10000 100000; do
        for arming in ahead early; do
            echo "== N = $n, armed $arming"
            python3 benches/scripts/alternate.py target/release/compare:simple-registry-async-io \
                target/release/compare:ffi-pump-tokio "$n" 15 "$arming"
        done
    done
}
run alternate alternate
echo "== done ($(date -u +%H:%M:%S) UTC): $out"
