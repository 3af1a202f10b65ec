"""Warm up, profile one training step, and write its top kernels as CSV (kernel_name,total_time_ms,instances,
mean_time_ms) beside the profile they came from.

    python skills/capture-profile/scripts/capture.py --out DIR [--config CFG] [--warmup 3] [--rows 20]
        [--tool auto|nsys|torch] [--set SECTION.KEY=VALUE ...]

Runs the trainer's own step (`pretrain_lm.forward_backward` + `pretrain_lm.optimizer_step`) on the config.
`--tool auto` uses Nsight Systems when `nsys` is on PATH and CUDA is visible, else torch.profiler. Keeps
DIR/profile.nsys-rep + DIR/profile.sqlite (nsys; the CSV is `nsys stats`'s cuda_gpu_kern_sum) or
DIR/profile.json (torch.profiler's Chrome trace, aggregated by check.py's reader: the profiler's in-memory
events count nested same-name operators differently from the trace it writes). On CPU the rows are ATen
operators: there are no kernels. check.py re-aggregates the kept profile and compares.
"""

import argparse
import csv
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from check import trace_totals

from pithtrain.tasks.pretrain_lm import forward_backward, load_pretrain_cfg, optimizer_step, setup

HEADER = ["kernel_name", "total_time_ms", "instances", "mean_time_ms"]


def write_csv(path: Path, rows: list[tuple[str, float, int]], limit: int) -> None:
    """rows: (name, total ms, instances); the `limit` largest totals are written."""
    rows = sorted(rows, key=lambda r: -r[1])[:limit]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        for name, total, n in rows:
            w.writerow([name, f"{total:.6f}", n, f"{total / n:.6f}"])


def train_steps(args, profiled_step) -> None:
    """`args.warmup` steps, then `profiled_step(step, device)` wrapped around one more."""
    overrides = [f'run_dir="{args.out / "run"}"', "checkpoint.interval=0", *args.overrides]
    overrides.append(f"training.max_steps={args.warmup + 1}")
    run = setup(load_pretrain_cfg(args.config, overrides))
    batch = run.cfg.training.global_batch_size

    def step(i):
        forward_backward(run, i * batch)
        optimizer_step(run, i)
        if run.device.type == "cuda":
            torch.cuda.synchronize()

    for i in range(args.warmup):
        step(i)
    profiled_step(lambda: step(args.warmup), run.device)


def torch_profile(args) -> None:
    holder = {}

    def profiled(step, device):
        activities = [torch.profiler.ProfilerActivity.CPU]
        activities += [torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else []
        with torch.profiler.profile(activities=activities) as prof:
            step()
        holder["prof"] = prof

    train_steps(args, profiled)
    holder["prof"].export_chrome_trace(str(args.out / "profile.json"))
    totals = trace_totals(args.out / "profile.json")
    write_csv(args.out / "kernels.csv", [(n, t, c) for n, (t, c) in totals.items()], args.rows)


def nsys_child(args) -> None:
    def profiled(step, device):
        torch.cuda.cudart().cudaProfilerStart()
        step()
        torch.cuda.cudart().cudaProfilerStop()

    train_steps(args, profiled)


def nsys_profile(args) -> None:
    rep = args.out / "profile"
    child = [sys.executable, __file__, "--tool", "nsys-child", "--out", str(args.out), "--config", args.config]
    child += ["--warmup", str(args.warmup), *[a for s in args.overrides for a in ("--set", s)]]
    nsys = ["nsys", "profile", "--trace=cuda", "--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    nsys += ["--sample=none", "--cpuctxsw=none", "--force-overwrite=true", f"--output={rep}"]
    subprocess.run(nsys + child, check=True)
    export = ["nsys", "export", "--type", "sqlite", "--force-overwrite", "true", "--output", f"{rep}.sqlite"]
    subprocess.run(export + [f"{rep}.nsys-rep"], check=True)  # the kept profile check.py re-aggregates
    stats = ["nsys", "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--output", str(args.out / "stats")]
    subprocess.run(stats + [f"{rep}.sqlite"], check=True)
    summaries = sorted(args.out.glob("stats*kern_sum*.csv"))
    if not summaries:
        listing = sorted(p.name for p in args.out.iterdir())
        raise SystemExit(f"nsys stats wrote no kernel summary in {args.out}: {listing}")
    rows = []
    with open(summaries[0], newline="") as f:
        for r in csv.DictReader(f):
            rows.append((r["Name"], float(r["Total Time (ns)"]) / 1e6, int(r["Instances"])))
    write_csv(args.out / "kernels.csv", rows, args.rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=lambda p: Path(p).resolve(), help="folder for profile + CSV")
    ap.add_argument("--config", default="examples/qwen3-moe-tiny.toml", help="run config")
    ap.add_argument("--warmup", type=int, default=3, help="unprofiled steps first")
    ap.add_argument("--rows", type=int, default=20, help="kernels in the CSV (largest total time first)")
    ap.add_argument("--tool", default="auto", choices=["auto", "nsys", "torch", "nsys-child"])
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tool = args.tool
    if tool == "auto":
        tool = "nsys" if shutil.which("nsys") and torch.cuda.is_available() else "torch"
    if tool == "nsys" and not (shutil.which("nsys") and torch.cuda.is_available()):
        raise SystemExit("--tool nsys needs `nsys` on PATH and a CUDA device; use --tool torch")
    {"nsys": nsys_profile, "torch": torch_profile, "nsys-child": nsys_child}[tool](args)
    if tool != "nsys-child":
        print(f"{tool}: wrote {args.out / 'kernels.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
