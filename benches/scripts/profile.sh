#!/usr/bin/env bash
# Whole-process profiles of one fixture cell, for BENCHMARKS.md's "Where the time goes":
#
#     benches/scripts/profile.sh COMPARE_BINARY APPROACH [N] [CELLS]     (N 10000, CELLS 15)
#
# Runs CELLS cells of APPROACH at N waits, each under `perf record -e cpu-clock -F 4000 -g`
# (Debian's linux-perf), then prints, summed over the cells, the samples of the frames the page
# compares: each frame's inclusive samples (the frame and what it calls).
set -euo pipefail
bin=$1 approach=$2 n=${3:-10000} cells=${4:-15}
out=$(mktemp -d)
for i in $(seq 1 "$cells"); do
    perf record -q -e cpu-clock -F 4000 -g -o "$out/p$i.data" "$bin" --cell "$approach" "$n" >/dev/null 2>&1
done
for data in "$out"/p*.data; do
    perf report --stdio -n --children --sort symbol -g none --percent-limit 0 -i "$data" 2>/dev/null
done | python3 -c '
import re, sys, collections
frames = {
    "the evaluation pass, checks included (ffi-pump: Typed::evaluate; simple: extract_if)":
        ("Column>::evaluate", "RawExtractIf<T,A>::next"),
    "the C check (FakeLoop::check)": ("fake_loop::FakeLoop::check",),
    "the C run (FakeLoop::run_once)": ("fake_loop::FakeLoop::run_once",),
    "async-io reactor thread: its epoll wait (polling wait_deadline)": ("polling::epoll::Poller::wait_deadline",),
    "waking a parked tokio worker (mio Waker::wake)": ("mio::sys::unix::waker::Waker::wake",),
    "malloc (_int_malloc)": ("_int_malloc",),
    "tokio: a finished task leaves its list (OwnedTasks::remove)": ("OwnedTasks<S>::remove",),
}
total, seen = 0, collections.Counter()
for line in sys.stdin:
    m = re.match(r"# Samples: (\d+)", line)
    if m:
        total += int(m.group(1))
    m = re.match(r"\s+([\d.]+)%\s+[\d.]+%\s+\d+\s+\[.\]\s+(.*)", line)
    if m and total:
        for name, keys in frames.items():
            if any(k in m.group(2) for k in keys):
                seen[name] += float(m.group(1))
cells = int(sys.argv[1])
print(f"samples in all: {total}")
for name in frames:
    share = seen[name] / cells
    print(f"{name}: {share * total / 100:.0f} samples ({share:.1f} %)")
' "$cells"
rm -rf "$out"
