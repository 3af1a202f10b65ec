"""Gold for Report Heavy Kernels on pithtrain: the training steps of `pithtrain train`, 3 warm-up steps, step 4 under
torch.profiler; the Chrome trace and the top-3 CSV go to artifacts/heavy-kernels/.

    python profile_step.py CONFIG

CPU: torch.profiler's own per-operator self time (key_averages); GPU: the trace's kernel events summed by name.
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


def gpu_kernels(trace: Path) -> dict[str, list[float]]:
    times = defaultdict(list)
    for e in json.loads(trace.read_text())["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            times[e["name"]].append(e["dur"] / 1000)
    return {name: [sum(t), len(t)] for name, t in times.items()}


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
    if cuda:
        totals = gpu_kernels(OUT / "trace.json")
    else:
        totals = {e.key: [e.self_cpu_time_total / 1000, e.count] for e in prof.key_averages()}
    top = sorted(totals.items(), key=lambda kv: -kv[1][0])[:3]
    with open(OUT / "top-kernels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kernel_name", "total_time_ms", "instances", "mean_time_ms"])
        for name, (total, n) in top:
            w.writerow([name, f"{total:.4f}", n, f"{total / n:.4f}"])
    print((OUT / "top-kernels.csv").read_text(), end="")


if __name__ == "__main__":
    main()
