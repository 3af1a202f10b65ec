"""Gold for Report Heavy Kernels on torchtitan, second half: keep the Chrome trace TorchTitan's own profiler wrote for
the profiled step as artifacts/heavy-kernels/trace.json and write its 3 heaviest kernels to top-kernels.csv.

    python top_kernels.py TRACE

Aggregated from the kept trace, as the task defines it: GPU kernel events by duration, or, in a trace without
any (a CPU run), operator events by self time (duration less the operators directly nested in it, same thread).
"""

import argparse
import csv
import json
import shutil
from collections import defaultdict
from pathlib import Path

OUT = Path("artifacts/heavy-kernels")


def totals_from_trace(trace: Path) -> dict[str, list[float]]:
    """name -> [total ms, instances]."""
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
    times = defaultdict(list)
    for e in events:
        if e.get("cat") == "kernel":
            times[e["name"]].append(e["dur"])
    if times:
        return {name: [sum(t) / 1000, len(t)] for name, t in times.items()}
    threads = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op":
            threads[(e["pid"], e["tid"])].append(e)
    for ops in threads.values():
        ops.sort(key=lambda e: (e["ts"], -e["dur"]))
        for i, op in enumerate(ops):  # its direct children: inside it, and not inside an earlier child
            end, inner, child_end = op["ts"] + op["dur"], 0, -1
            for c in ops[i + 1 :]:
                if c["ts"] >= end:
                    break
                if c["ts"] >= child_end:
                    inner += c["dur"]
                    child_end = c["ts"] + c["dur"]
            times[op["name"]].append(op["dur"] - inner)
    return {name: [sum(t) / 1000, len(t)] for name, t in times.items()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("trace", type=Path, help="rank0_trace.json of the profiled step, as TorchTitan wrote it")
    trace = p.parse_args().trace
    OUT.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(trace, OUT / "trace.json")
    top = sorted(totals_from_trace(OUT / "trace.json").items(), key=lambda kv: -kv[1][0])[:3]
    with open(OUT / "top-kernels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kernel_name", "total_time_ms", "instances", "mean_time_ms"])
        for name, (total, n) in top:
            w.writerow([name, f"{total:.4f}", n, f"{total / n:.4f}"])
    print((OUT / "top-kernels.csv").read_text(), end="")


if __name__ == "__main__":
    main()
