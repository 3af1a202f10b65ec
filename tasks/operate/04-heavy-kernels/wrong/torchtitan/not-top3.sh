#!/usr/bin/env bash
# FAILs for: is no kernel of the kept profile|, the profile says |the profile's top 3 are
# Wrong: the gold's profile (TorchTitan's own profiler, step 4) is kept, but the CSV ranks operators by inclusive time
# (their nested operators counted in), a common slip: real names from the trace, well-formed and sorted, yet not the
# top 3 by self time.
set -euo pipefail
GOLD_DIR="$GOLD_DIR/../../gold/torchtitan" bash "$GOLD_DIR/../../gold/torchtitan/solve.sh"
python - <<'PY'
import csv
import json
from collections import defaultdict

events = json.load(open("artifacts/heavy-kernels/trace.json"))["traceEvents"]
total, count = defaultdict(float), defaultdict(int)
for e in events:
    if e.get("ph") == "X" and e.get("cat") == "cpu_op":
        total[e["name"]] += e["dur"] / 1000
        count[e["name"]] += 1
with open("artifacts/heavy-kernels/top-kernels.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["kernel_name", "total_time_ms", "instances", "mean_time_ms"])
    for name in sorted(total, key=lambda n: -total[n])[:3]:
        w.writerow([name, f"{total[name]:.4f}", count[name], f"{total[name] / count[name]:.4f}"])
PY
