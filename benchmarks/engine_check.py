"""GPU check of the distributed engine: meshes with NCCL against the 1-GPU run.

For a tiny and a mid-size Qwen3-MoE (hidden 2048, 4 layers, 64 experts top-8), trains 20 steps on one
GPU and on each mesh that fits the GPUs present (PP2, EP2; PP2xEP2 on 4; PP2xDP2xEP2 and EP8 on 8) with
the same seed, global batch and micro-batch size, and prints per-step losses' largest relative difference
to the 1-GPU run and the median step time. Runs on the GPU machine:
    python3 benchmarks/engine_check.py --out $OUT [--meshes PP2xEP2,EP8]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from throughput import git_state  # noqa: E402

MODELS = {
    "tiny": dict(vocab_size=2048, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=16, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64),
    "mid": dict(vocab_size=32768, hidden_size=2048, num_hidden_layers=4, num_attention_heads=32,
                num_key_value_heads=4, head_dim=128, num_experts=64, num_experts_per_tok=8, moe_intermediate_size=768),
}  # fmt: skip
PP2, EP2 = "distributed.pipeline_parallel_size=2", "distributed.expert_parallel_size=2"
MESHES = {"1gpu": (1, []), "PP2": (2, [PP2]), "EP2": (2, [EP2]), "PP2xEP2": (4, [PP2, EP2]),
          "PP2xDP2xEP2": (8, [PP2, EP2]), "EP8": (8, ["distributed.expert_parallel_size=8"])}  # fmt: skip


def write_config(path: Path, model: str, run_dir: Path, seq_len: int) -> None:
    lines = [f'run_dir = "{run_dir}"', "[model]", 'family = "qwen3_moe"']
    lines += [f"{k} = {v}" for k, v in MODELS[model].items()]
    # 16 sequences: PP2xDP2xEP2 has 4 data ranks, and DualPipeV needs 2 x PP micro-batches on each.
    lines += ["[training]", "max_steps = 20", "global_batch_size = 16", "micro_batch_size = 1", "lr = 3e-4",
              "min_lr = 3e-5", "warmup_steps = 5", 'device = "cuda"', "[data]", 'kind = "synthetic"',
              f"seq_len = {seq_len}", "[logging]", "log_interval = 5"]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/engine_check")
    parser.add_argument("--models", default="tiny,mid")
    parser.add_argument("--meshes", default=None, help="comma list of MESHES; default: every one that fits the GPUs")
    args = parser.parse_args()
    import torch  # the GPU count and provenance; the runs themselves are subprocesses

    gpus = torch.cuda.device_count()
    wanted = args.meshes.split(",") if args.meshes else [m for m, (n, _) in MESHES.items() if n <= gpus]
    meshes = {m: MESHES[m] for m in ["1gpu", *wanted] if MESHES[m][0] <= gpus}
    if skipped := [m for m in ["1gpu", *wanted] if m not in meshes]:
        print(f"skipped (more GPUs than the {gpus} here): {', '.join(skipped)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in args.models.split(","):
        seq_len = 256 if model == "tiny" else 2048
        losses = {}
        for mesh, (nproc, overrides) in meshes.items():
            run_dir = out / f"{model}-{mesh}"
            config = out / f"{model}-{mesh}.toml"
            write_config(config, model, run_dir, seq_len)
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                   "-m", "pithtrain", "train", str(config)] + [a for o in overrides for a in ("--set", o)]  # fmt: skip
            with open(out / f"{model}-{mesh}.log", "w") as log:
                rc = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=os.environ).returncode
            metrics = [json.loads(line) for line in open(run_dir / "metrics.jsonl")] if rc == 0 else []
            losses[mesh] = [m["loss"] for m in metrics]
            step_s = statistics.median(m["step_time_s"] for m in metrics[3:]) if metrics else float("nan")
            ref = losses["1gpu"]
            if rc != 0 or not ref or len(losses[mesh]) != len(ref):
                diff = float("nan")
            else:
                diff = max(abs(a - b) / abs(b) for a, b in zip(losses[mesh], ref))
            rows.append((model, mesh, rc, len(losses[mesh]), losses[mesh][-1] if losses[mesh] else float("nan"),
                         diff, step_s))  # fmt: skip
    commit, dirty = git_state()
    names = [torch.cuda.get_device_name(i) for i in range(gpus)]
    provenance = {"command": " ".join(sys.argv), "commit": commit, "git_dirty": dirty, "torch": torch.__version__,
                  "gpus": names}  # fmt: skip
    (out / "engine_check.json").write_text(json.dumps({"provenance": provenance, "rows": rows}, indent=1))
    ok = len({r[1] for r in rows}) > 1 and all(r[2] == 0 and (r[1] == "1gpu" or r[5] < 2e-2) for r in rows)
    print(f"{'model':6} {'mesh':5} {'rc':>3} {'steps':>5} {'last loss':>10} {'max rel diff vs 1gpu':>21} {'step s':>8}")
    for model, mesh, rc, n, last, diff, step_s in rows:
        print(f"{model:6} {mesh:5} {rc:>3} {n:>5} {last:>10.4f} {diff:>21.2e} {step_s:>8.3f}")
    print("PASS" if ok else "FAIL: no mesh ran, a run failed, or its losses left the bf16 tolerance (2e-2) of 1 GPU")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
