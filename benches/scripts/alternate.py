"""Paired cells of the fixture workload, alternated: two (binary, approach) sides, one cell each
in turn, the order swapped every repeat, so that both see the same stretch of a noisy machine.
Prints each side's medians and the median (and quartiles) of B's CPU over A's, cell by cell.

    python3 benches/scripts/alternate.py A_BINARY:APPROACH B_BINARY:APPROACH N REPEATS [early]

e.g. `target/release/compare:simple-registry-async-io target/release/compare:ffi-pump-tokio
10000 21 early` (ffi-pump against the simple design), or two builds of `compare` with the same
approach (a change against the commit before it).
"""
import json
import os
import statistics
import subprocess
import sys

a, b, n, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
env = dict(os.environ)
if len(sys.argv) > 5 and sys.argv[5] == "early":
    env["COMPARE_ARMING"] = "early"
else:
    env.pop("COMPARE_ARMING", None)
sides = {"A": a.split(":", 1), "B": b.split(":", 1)}
cells = {"A": [], "B": []}
for repeat in range(repeats):
    for side in ("A", "B") if repeat % 2 == 0 else ("B", "A"):
        binary, approach = sides[side]
        out = subprocess.run([binary, "--cell", approach, n], capture_output=True, text=True,
                             env=env, check=True).stdout
        cell = json.loads(out)
        cells[side].append((cell["cpu_cores"], cell["deadline_to_seen_us"]["p99"]))
for side in ("A", "B"):
    cpu = statistics.median(c for c, _ in cells[side])
    p99 = statistics.median(p for _, p in cells[side])
    print(f"{side} {sides[side][1]} ({sides[side][0]}), N = {n}: CPU {cpu:.4f} cores, p99 {p99:.0f} µs")
ratios = sorted(bc / ac for (ac, _), (bc, _) in zip(cells["A"], cells["B"]))
q = len(ratios) // 4
print(f"B / A CPU, cell by cell: median {statistics.median(ratios):.3f} "
      f"[quartiles {ratios[q]:.2f} – {ratios[-1 - q]:.2f}] over {repeats} pairs")
