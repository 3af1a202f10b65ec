"""Compare estimate.py with what a run holds; prints PASS or FAIL: <reason>.

    python skills/estimate-memory/scripts/check.py [--config CFG] [--nproc N] [--set ...]          # CPU: exact
    python skills/estimate-memory/scripts/check.py --gpu [--steps 3] [--error 0.25] [--set ...]    # one GPU

CPU: sets up the run (under torchrun for N > 1, gloo), takes one step, and on every rank compares the estimate
with the bytes it holds: parameters and gradients (local FSDP shards) after the backward, AdamW state after the
update. These must be equal to the byte. GPU: trains `--steps` steps in bf16 and compares the estimated total
with `torch.cuda.max_memory_allocated`; PASS within `--error` (relative to the measurement).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import estimate as est
import torch

from pithtrain.contexts import distributed
from pithtrain.tasks.pretrain_lm import forward_backward, load_pretrain_cfg, optimizer_step, setup


def local_bytes(tensors) -> int:
    """Bytes of this rank's part of each tensor (FSDP gradients are views into one shared buffer: count views)."""
    local = [t.to_local() if hasattr(t, "to_local") else t for t in tensors]
    return sum(t.numel() * t.element_size() for t in local)


def cpu_problems(cfg) -> list[str]:
    run = setup(cfg)
    d = distributed
    forward_backward(run, 0)
    measured = {
        "parameters": local_bytes(run.model.parameters()),
        "gradients": local_bytes(p.grad for p in run.model.parameters() if p.grad is not None),
    }
    optimizer_step(run, 0)
    measured["optimizer"] = local_bytes(t for s in run.optimizer.state.values() for t in s.values())
    if cfg.distributed.hsdp:
        dense, expert = d.cp_rank * d.ep_size + d.ep_rank, d.cp_rank
    else:
        dense, expert = (d.dp_rank * d.cp_size + d.cp_rank) * d.ep_size + d.ep_rank, d.dp_rank * d.cp_size + d.cp_rank
    mesh = est.Mesh(d.world_size, d.pp_size, d.dp_size, d.cp_size, d.ep_size, cfg.distributed.hsdp)
    expected = est.estimate(cfg, mesh, d.pp_rank, bf16=False, dense_index=dense, expert_index=expert)
    return [
        f"rank {d.rank} {key}: estimated {expected[key]:,} bytes, holds {measured[key]:,}"
        for key in measured
        if expected[key] != measured[key]
    ]


def gpu_check(cfg, steps: int, error: float) -> list[str]:
    run = setup(cfg)
    torch.cuda.reset_peak_memory_stats()
    for step in range(steps):
        forward_backward(run, step * cfg.training.global_batch_size)
        optimizer_step(run, step)
    torch.cuda.synchronize()
    measured = torch.cuda.max_memory_allocated()
    mesh = est.Mesh(1, 1, 1, 1, 1, False)
    terms = est.estimate(cfg, mesh, 0, bf16=run.dtype == torch.bfloat16)
    if terms["total"] is None:
        return [f"no activation model for model.family = {cfg.model.family!r}: the GPU check needs qwen3_moe"]
    gap = (terms["total"] - measured) / measured
    parts = ", ".join(f"{k} {terms[k] / 2**30:.3f}" for k in ("parameters", "gradients", "optimizer", "activations"))
    print(f"estimate {terms['total'] / 2**30:.3f} GiB ({parts}); max_memory_allocated {measured / 2**30:.3f} GiB")
    print(f"relative error {100 * gap:+.1f}% (allowed {100 * error:.0f}%)")
    if abs(gap) > error:
        return [f"estimate {terms['total'] / 2**30:.3f} GiB is {100 * gap:+.1f}% off the measured peak "
                f"{measured / 2**30:.3f} GiB, beyond {100 * error:.0f}%"]  # fmt: skip
    return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="examples/qwen3-moe-tiny.toml")
    ap.add_argument("--nproc", type=int, default=1, help="CPU: processes (the mesh comes from --set distributed.*)")
    ap.add_argument("--gpu", action="store_true", help="compare the total with max_memory_allocated on one GPU")
    ap.add_argument("--steps", type=int, default=3, help="--gpu: steps before reading the peak")
    ap.add_argument("--error", type=float, default=0.25, help="--gpu: allowed relative error of the total")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override")
    ap.add_argument("--result", help=argparse.SUPPRESS)  # a torchrun child writes its findings here
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="pith-memory-")
    overrides = [f'run_dir="{scratch}/run"', "checkpoint.interval=0", *args.overrides]
    if args.gpu:
        found = gpu_check(
            load_pretrain_cfg(args.config, overrides + ['training.device="cuda"']), args.steps, args.error
        )
    elif args.nproc == 1 or args.result:
        found = cpu_problems(load_pretrain_cfg(args.config, overrides + ['training.device="cpu"']))
        if args.result:
            Path(f"{args.result}.{distributed.rank}").write_text(json.dumps(found))
            return 0
    else:
        result = Path(scratch) / "found"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc}"]
        cmd += [__file__, "--config", args.config, "--result", str(result)]
        cmd += [a for s in args.overrides for a in ("--set", s)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ | {"OMP_NUM_THREADS": "1"})
        if done.returncode:
            print(f"FAIL: the {args.nproc}-process run exited {done.returncode}: {done.stderr.strip()[-400:]}")
            return 1
        found = [p for r in range(args.nproc) for p in json.loads(Path(f"{result}.{r}").read_text())]
    for reason in found:
        print(f"FAIL: {reason}")
    if not found:
        what = "total within the stated error" if args.gpu else "parameter, gradient and optimizer bytes exact"
        print(f"PASS ({what})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
