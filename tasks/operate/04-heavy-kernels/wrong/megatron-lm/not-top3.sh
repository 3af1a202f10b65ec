#!/usr/bin/env bash
# FAILs for: is no kernel of the kept profile|, the profile says |the profile's top 3 are
# Near miss only on gpu1: Megatron-LM runs only there (task.toml marks its smoke and paper golds unrunnable)
# Wrong: the gold's profile of step 4 is kept, but the CSV ranks the trace's operators by inclusive time, a common
# slip: each `cpu_op` is credited with the GPU time of every kernel launched inside it, nested operators' kernels
# counted in (what torch.profiler's key_averages() sorts by as device_time_total), or with its whole duration in a
# trace without kernels. Real names from the trace, well-formed and sorted, yet not the 3 heaviest kernels.
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) ;;
  smoke) echo "not run on smoke: megatron-core's MoE step needs CUDA (task.toml)" >&2; exit 2 ;;
  paper) echo "not written for paper: the paper profiled 8 ranks with nsys" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
GOLD_DIR="$GOLD_DIR/../../gold/megatron-lm" bash "$GOLD_DIR/../../gold/megatron-lm/solve.sh"
python - <<'PY'
import bisect
import csv
import json
from collections import defaultdict
from itertools import accumulate

trace = json.load(open("artifacts/heavy-kernels/trace.json"))
events = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
kernels = [e for e in events if e.get("cat") == "kernel" and "correlation" in e.get("args", {})]
kernel_us = {e["args"]["correlation"]: e["dur"] for e in kernels}
launched = defaultdict(list)  # host thread -> [(launch time, its kernel's duration)]
for e in events:
    correlation = e.get("args", {}).get("correlation")
    if e.get("cat") in ("cuda_runtime", "cuda_driver") and correlation in kernel_us:
        launched[(e.get("pid"), e.get("tid"))].append((e["ts"], kernel_us[correlation]))
starts, sums = {}, {}
for thread, launches in launched.items():
    launches.sort()
    starts[thread] = [ts for ts, _ in launches]
    sums[thread] = [0.0, *accumulate(us for _, us in launches)]


def inclusive_us(op):
    if not kernel_us:  # no GPU activity in the trace: the operator's duration, nested operators included
        return op["dur"]
    thread = (op.get("pid"), op.get("tid"))
    if thread not in starts:
        return 0.0
    first = bisect.bisect_left(starts[thread], op["ts"])
    last = bisect.bisect_right(starts[thread], op["ts"] + op["dur"])
    return sums[thread][last] - sums[thread][first]


total, count = defaultdict(float), defaultdict(int)
for op in (e for e in events if e.get("cat") == "cpu_op"):
    total[op["name"]] += inclusive_us(op) / 1000
    count[op["name"]] += 1
with open("artifacts/heavy-kernels/top-kernels.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["kernel_name", "total_time_ms", "instances", "mean_time_ms"])
    for name in sorted(total, key=lambda n: -total[n])[:3]:
        w.writerow([name, f"{total[name]:.4f}", count[name], f"{total[name] / count[name]:.4f}"])
print(open("artifacts/heavy-kernels/top-kernels.csv").read(), end="")
PY
