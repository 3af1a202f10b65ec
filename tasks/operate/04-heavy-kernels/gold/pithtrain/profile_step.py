"""Gold for Report Heavy Kernels on pithtrain: the training steps of `pithtrain train`, 3 warm-up steps, step 4 under
torch.profiler; the Chrome trace and the top-3 CSV go to artifacts/heavy-kernels/.

    python profile_step.py CONFIG

Aggregated from the kept trace, as the task defines it: GPU kernel events by duration, or on the CPU operator events
by self time (duration less the operators that start and end inside it, one level down, on the same thread).
torch.profiler's key_averages() counts some operators differently from its own trace, so it is not used.
"""

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from pithtrain.tasks.pretrain_lm import forward_backward, load_pretrain_cfg, optimizer_step, setup

OUT = Path("artifacts/heavy-kernels")
WARMUP = 3


def totals_from_trace(trace: Path, cuda: bool) -> dict[str, list[float]]:
    """name -> [total ms, instances]."""
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
    times = defaultdict(list)
    if cuda:
        for e in events:
            if e.get("cat") == "kernel":
                times[e["name"]].append(e["dur"])
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
    p.add_argument("config")
    cfg = load_pretrain_cfg(p.parse_args().config)
    run = setup(cfg)
    gb, cuda = cfg.training.global_batch_size, run.device.type == "cuda"
    for step in range(WARMUP):
        forward_backward(run, step * gb)
        optimizer_step(run, step)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        forward_backward(run, WARMUP * gb)
        optimizer_step(run, WARMUP)
        if cuda:
            torch.cuda.synchronize()
    OUT.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(OUT / "trace.json"))
    totals = totals_from_trace(OUT / "trace.json", cuda)
    top = sorted(totals.items(), key=lambda kv: -kv[1][0])[:3]
    with open(OUT / "top-kernels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kernel_name", "total_time_ms", "instances", "mean_time_ms"])
        for name, (total, n) in top:
            w.writerow([name, f"{total:.4f}", n, f"{total / n:.4f}"])
    print((OUT / "top-kernels.csv").read_text(), end="")


if __name__ == "__main__":
    main()
