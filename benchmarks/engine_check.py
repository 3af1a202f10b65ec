"""GPU check of the distributed engine (issue 3): PP2 and EP2 with NCCL against the 1-GPU run.

For a tiny and a mid-size Qwen3-MoE (hidden 2048, 4 layers, 64 experts top-8), trains 20 steps on one
GPU and on two (PP2, EP2) with the same seed, global batch and micro-batch size, and prints per-step
losses' largest relative difference to the 1-GPU run and the median step time. Runs on the GPU machine:
    python3 benchmarks/engine_check.py --out $OUT
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = {
    "tiny": dict(vocab_size=2048, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=16, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64),
    "mid": dict(vocab_size=32768, hidden_size=2048, num_hidden_layers=4, num_attention_heads=32,
                num_key_value_heads=4, head_dim=128, num_experts=64, num_experts_per_tok=8, moe_intermediate_size=768),
}  # fmt: skip
MESHES = {"1gpu": (1, []), "PP2": (2, ["distributed.pipeline_parallel_size=2"]),
          "EP2": (2, ["distributed.expert_parallel_size=2"])}  # fmt: skip


def write_config(path: Path, model: str, run_dir: Path, seq_len: int) -> None:
    lines = [f'run_dir = "{run_dir}"', "[model]", 'family = "qwen3_moe"']
    lines += [f"{k} = {v}" for k, v in MODELS[model].items()]
    lines += ["[training]", "max_steps = 20", "global_batch_size = 8", "micro_batch_size = 1", "lr = 3e-4",
              "min_lr = 3e-5", "warmup_steps = 5", 'device = "cuda"', "[data]", 'kind = "synthetic"',
              f"seq_len = {seq_len}", "[logging]", "log_interval = 5"]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/engine_check")
    parser.add_argument("--models", default="tiny,mid")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in args.models.split(","):
        seq_len = 256 if model == "tiny" else 2048
        losses = {}
        for mesh, (nproc, overrides) in MESHES.items():
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
    import torch  # provenance only; the runs themselves are subprocesses

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    provenance = {"command": " ".join(sys.argv), "commit": commit or "unknown (no .git here)",
                  "torch": torch.__version__, "gpus": gpus}  # fmt: skip
    (out / "engine_check.json").write_text(json.dumps({"provenance": provenance, "rows": rows}, indent=1))
    ok = all(r[2] == 0 and (r[1] == "1gpu" or r[5] < 2e-2) for r in rows)
    print(f"{'model':6} {'mesh':5} {'rc':>3} {'steps':>5} {'last loss':>10} {'max rel diff vs 1gpu':>21} {'step s':>8}")
    for model, mesh, rc, n, last, diff, step_s in rows:
        print(f"{model:6} {mesh:5} {rc:>3} {n:>5} {last:>10.4f} {diff:>21.2e} {step_s:>8.3f}")
    print("PASS" if ok else "FAIL: a run failed or its losses left the bf16 tolerance (2e-2) of the 1-GPU run")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
