"""Where one pithtrain training step spends its GPU time: torch.profiler over a few steps of a benchmark config.

    python3 benchmarks/profile_step.py --config qwen3-30b-a3b-4l [--variant compiled] [--balanced-routing] --out DIR
    python3 benchmarks/profile_step.py --smoke --out DIR      # CPU, the smoke-tiny config (tests run it)
    torchrun --standalone --nproc-per-node 2 benchmarks/profile_step.py --config qwen3-30b-a3b-4l --ep 2 --out DIR

Runs the same step as `launch` (forward/backward over the global batch, clip, AdamW) on the configuration's
shape with synthetic tokens, times `--steps W,P` (W warm-up steps, then P profiled ones), and prints on rank 0:
the step time without the profiler, the kernels that take the most GPU time, and the GPU time summed by kind
(matmul, grouped matmul, attention, communication, optimizer, ...). Writes the same to DIR/profile-<tag>.txt.
This is a diagnosis tool, not a benchmark: throughput figures come from benchmarks/throughput.py.
"""

import argparse
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from throughput import load_config, pithtrain_toml  # noqa: E402

from pithtrain.contexts import distributed  # noqa: E402
from pithtrain.tasks import pretrain_lm  # noqa: E402
from pithtrain.tasks.pretrain_lm import forward_backward, load_pretrain_cfg, optimizer_step, setup  # noqa: E402

# First match wins; names are CUDA kernel names as the profiler reports them.
KINDS = [
    ("communication", r"nccl|all_to_all|AllGather|ReduceScatter|AllReduce"),
    ("optimizer", r"adam|Adam|multi_tensor|foreach"),
    ("copy / cast", r"^_upcast_kernel$"),  # operators/weight_cast.py, a Triton kernel doing what torch's casts did
    ("attention", r"flash|fmha|attention|cudnn|sdpa"),
    ("grouped matmul", r"grouped|Grouped"),
    ("matmul", r"gemm|Gemm|nvjet|cutlass|sm90_xmma|wgmma|GEMM|cublas"),
    ("triton (fused)", r"^triton_|_kernel$"),
    ("copy / cast", r"copy|Copy|convert|cast|memcpy|Memcpy|memset|Memset|fill"),
    ("reduction", r"reduce|Reduce|softmax|Softmax|logsumexp|norm"),
    ("index / sort", r"index|Index|scatter|gather|sort|Sort|radix|cumsum|scan|nonzero|bincount|histogram"),
    ("elementwise", r"elementwise|vectorized|unrolled"),
]


def kind_of(name: str) -> str:
    return next((kind for kind, pattern in KINDS if re.search(pattern, name)), "other")


def one_step(run) -> None:
    forward_backward(run, 0)
    optimizer_step(run, 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="qwen3-30b-a3b-4l", help="a table of benchmarks/configs.toml")
    ap.add_argument("--ep", type=int, default=1, help="expert-parallel size (launch with torchrun for > 1)")
    ap.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    ap.add_argument("--variant", default="eager", choices=["eager", "compiled", "fp8"], help="fp8: compiled + FP8")
    ap.add_argument("--balanced-routing", action="store_true", help="model.force_balanced_routing = true")
    ap.add_argument("--steps", default="3,2", help="warm-up steps, profiled steps")
    ap.add_argument("--rows", type=int, default=25, help="kernels listed")
    ap.add_argument("--out", default=".", help="folder for profile-<tag>.txt")
    ap.add_argument("--smoke", action="store_true", help="CPU, config smoke-tiny, fp32: checks that the tool runs")
    args = ap.parse_args()
    warm, profiled = (int(s) for s in args.steps.split(","))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    name = "smoke-tiny" if args.smoke else args.config
    cfg = load_config(name)
    mesh = {"gpus": world, "nodes": 1, "pp": args.pp, "cp": 1, "ep": args.ep}
    work = Path(tempfile.mkdtemp(prefix="pith-profile-"))
    routing = "balanced" if args.balanced_routing else "natural"
    text = pithtrain_toml(cfg, mesh, routing, args.variant, work / "run", warm + profiled, smoke=args.smoke)
    (work / "pithtrain.toml").write_text(text)
    pretrain_lm.check_checkpoint_dir = lambda ckpt_dir, rank_bytes: None  # no save: a checkpoint's room is not needed
    run = setup(load_pretrain_cfg(str(work / "pithtrain.toml")))
    leader, cuda = distributed.rank == 0, run.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else lambda: None

    times = []
    for _ in range(warm):
        sync()
        t0 = time.perf_counter()
        one_step(run)
        sync()
        times.append(time.perf_counter() - t0)
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(activities=activities) as prof:
        sync()
        t0 = time.perf_counter()
        for _ in range(profiled):
            one_step(run)
        sync()
        wall = (time.perf_counter() - t0) / profiled
    if not leader:
        return 0

    per_kernel, per_kind = defaultdict(lambda: [0.0, 0]), defaultdict(float)
    for event in prof.events():
        # GPU-side user annotations (Optimizer.step#..., nccl:...) span kernels that are counted anyway.
        if event.device_type == torch.autograd.DeviceType.CUDA and not getattr(event, "is_user_annotation", False):
            us = event.device_time / profiled
            per_kernel[event.name][0] += us
            per_kernel[event.name][1] += 1
            per_kind[kind_of(event.name)] += us
    gpu_total = sum(per_kind.values()) or 1.0  # no GPU kernels on CPU
    tag = f"{name}-pp{args.pp}-ep{args.ep}-{args.variant}"
    tag += "-balanced" if args.balanced_routing else ""
    lines = [
        f"# {tag}: world {world}, torch {torch.__version__}, {torch.cuda.get_device_name() if cuda else 'CPU'}",
        f"step wall time: warm-up {', '.join(f'{t * 1e3:.0f}' for t in times)} ms; profiled {wall * 1e3:.1f} ms",
        f"GPU kernel time {gpu_total / 1e3:.1f} ms/step (kernels on several streams can overlap)",
        "",
        f"{'kind':<16} {'ms/step':>8} {'share':>6}",
    ]
    for kind, us in sorted(per_kind.items(), key=lambda kv: -kv[1]):
        lines.append(f"{kind:<16} {us / 1e3:8.2f} {us / gpu_total:6.1%}")
    lines += ["", f"{'ms/step':>8} {'calls':>6}  kernel"]
    for name, (us, calls) in sorted(per_kernel.items(), key=lambda kv: -kv[1][0])[: args.rows]:
        lines.append(f"{us / 1e3:8.2f} {calls // profiled:6d}  {name[:110]}")
    report = "\n".join(lines)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"profile-{tag}.txt").write_text(report + "\n")
    print(report, flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    sys.exit(code)
