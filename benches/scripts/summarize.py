"""The fixture tables of BENCHMARKS.md from the outputs `report.sh` kept: medians over the
repeats, with the range, of each row of `compare --early` (ratios to simple-registry-async-io,
issue 24's simple design, in the same repeat) and of `compare --targets` (ratios to background-1ms in the same repeat).

    python3 benches/scripts/summarize.py [OUT]       (default: target/report)
"""
import re
import statistics
import sys
from collections import defaultdict

out = sys.argv[1] if len(sys.argv) > 1 else "target/report"


def rows(path, cells):
    """The table rows of a compare output with `cells` columns."""
    for line in open(path):
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if len(parts) == cells and re.fullmatch(r"\d+", parts[0]):
            yield parts


def spread(values, digits=2):
    values = sorted(values)
    return f"{statistics.median(values):.{digits}f} [{values[0]:.{digits}f} – {values[-1]:.{digits}f}]"


early = defaultdict(list)
for n, arming, approach, _repeat, _runs, lat, cpu, _total, p99r, cpur in rows(f"{out}/early.txt", 10):
    p50, p99 = (int(x) for x in lat.split(" / "))
    early[(int(n), arming, approach)].append((p50, p99, float(cpu), float(p99r), float(cpur)))
print("| N | arming | approach | deadline→seen p50 / p99 µs | CPU cores | p99 / simple | CPU / simple |")
print("|---:|---|---|---:|---:|---:|---:|")
for (n, arming, approach), seen in early.items():
    p50 = statistics.median(s[0] for s in seen)
    p99 = statistics.median(s[1] for s in seen)
    print(f"| {n:,} | {arming} | {approach} | {p50:,.0f} / {p99:,.0f} | "
          f"{statistics.median(s[2] for s in seen):.3f} | {spread([s[3] for s in seen])} | "
          f"{spread([s[4] for s in seen])} |".replace(",", " "))

print()
targets = defaultdict(list)
for n, approach, _repeat, _rate, late, p99, p99r, cpu, cpur, _floor in rows(f"{out}/targets.txt", 10):
    targets[(int(n), approach)].append(
        (int(late), int(p99.split()[0]), float(p99r), float(cpu.split()[0]), float(cpur)))
print("| N | approach | late ticks | p99 µs | p99 / background-1ms | CPU cores | CPU / background-1ms |")
print("|---:|---|---:|---:|---:|---:|---:|")
for (n, approach), seen in targets.items():
    print(f"| {n:,} | {approach} | {statistics.median(s[0] for s in seen):.0f} | "
          f"{statistics.median(s[1] for s in seen):,.0f} | {spread([s[2] for s in seen])} | "
          f"{statistics.median(s[3] for s in seen):.2f} | {spread([s[4] for s in seen])} |".replace(",", " "))
