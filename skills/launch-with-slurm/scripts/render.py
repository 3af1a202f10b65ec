"""Render an sbatch script that trains CONFIG on NODES x GPUS_PER_NODE GPUs with a given (PP, CP, EP) mesh.

    python skills/launch-with-slurm/scripts/render.py --config CFG --nodes 2 --gpus-per-node 8 --pp 2 --ep 8
        [--cp 1] [--time 04:00:00] [--partition NAME] [--set SECTION.KEY=VALUE ...] --out job.sbatch

One torchrun per node (srun), c10d rendezvous on the first node of the allocation; DP is what the world size
leaves: world = PP x DP x CP x EP. The mesh is checked against the config before anything is written.
"""

import argparse
import shlex
import sys
from pathlib import Path

from pithtrain.config import UserInputError
from pithtrain.models import model_family
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

TEMPLATE = """#!/usr/bin/env bash
# {summary}
# Rendered by skills/launch-with-slurm/scripts/render.py; submit with: sbatch {out}
#SBATCH --job-name={job_name}
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={gpus}
#SBATCH --exclusive
{extra_sbatch}set -euo pipefail
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun --kill-on-bad-exit=1 python -m torch.distributed.run \\
    --nnodes {nodes} --nproc-per-node {gpus} \\
    --rdzv-backend c10d --rdzv-endpoint "$MASTER_ADDR:{port}" --rdzv-id "$SLURM_JOB_ID" \\
    -m pithtrain train {train_args}
"""


def mesh_problems(cfg, world: int, pp: int, cp: int, ep: int) -> list[str]:
    """What the trainer would refuse at start-up, found before the job waits in the queue."""
    if world % (pp * cp * ep):
        return [f"world size {world} is not a multiple of PP x CP x EP = {pp * cp * ep}"]
    dp, tc, found = world // (pp * cp * ep), cfg.training, []
    experts = getattr(cfg.model, model_family(cfg.model.family).experts_key)
    if experts % ep:
        found.append(f"{experts} experts are not divisible by --ep {ep}")
    if tc.global_batch_size % (dp * ep * tc.micro_batch_size):
        found.append(
            f"training.global_batch_size = {tc.global_batch_size} is not a multiple of DP x EP x micro_batch_size"
            f" = {dp} x {ep} x {tc.micro_batch_size}"
        )
    elif pp > 1 and tc.global_batch_size // (dp * ep * tc.micro_batch_size) < 2 * pp:
        found.append(f"DualPipeV needs at least {2 * pp} micro-batches per rank: raise training.global_batch_size")
    if cfg.data.seq_len % (2 * cp):
        found.append(f"data.seq_len = {cfg.data.seq_len} is not a multiple of 2 x --cp = {2 * cp}")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="run config (a path the job's nodes can read)")
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    ap.add_argument("--cp", type=int, default=1, help="context-parallel size")
    ap.add_argument("--ep", type=int, default=1, help="expert-parallel size")
    ap.add_argument("--time", help="#SBATCH --time, e.g. 04:00:00")
    ap.add_argument("--partition", help="#SBATCH --partition")
    ap.add_argument("--port", type=int, default=29500, help="rendezvous port on the first node")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override for the run")
    ap.add_argument("--out", required=True, type=Path, help="where to write the sbatch script")
    args = ap.parse_args()
    mesh = [f"distributed.pipeline_parallel_size={args.pp}", f"distributed.context_parallel_size={args.cp}"]
    mesh.append(f"distributed.expert_parallel_size={args.ep}")
    try:
        cfg = load_pretrain_cfg(args.config, args.overrides + mesh)
    except UserInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    world = args.nodes * args.gpus_per_node
    found = mesh_problems(cfg, world, args.pp, args.cp, args.ep)
    if found:
        print("error: " + "; ".join(found), file=sys.stderr)
        return 2
    dp = world // (args.pp * args.cp * args.ep)
    extra = "".join(f"#SBATCH --{k}={v}\n" for k, v in [("time", args.time), ("partition", args.partition)] if v)
    train_args = [args.config, *[x for s in args.overrides + mesh for x in ("--set", s)]]
    layout = f"PP {args.pp} DP {dp} CP {args.cp} EP {args.ep}"
    text = TEMPLATE.format(
        summary=f"{args.config} on {args.nodes} x {args.gpus_per_node} GPUs: {layout}",
        out=args.out, job_name=Path(args.config).stem, nodes=args.nodes, gpus=args.gpus_per_node,
        extra_sbatch=extra, port=args.port, train_args=" ".join(shlex.quote(a) for a in train_args),
    )  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}: {layout} on {world} GPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
