#!/usr/bin/env bash
# FAILs for: not the model's routing
# Near miss only on gpu1: Megatron-LM runs only there (task.toml marks its smoke and paper golds unrunnable)
# Wrong: the provided weights are made (make_checkpoint.py, as the task says to first), then four trace files of the
# right names, keys, dtypes and shapes (MoE layers, global batch, sequence and top-k read from model_args.sh's
# pretrain_gpt.py arguments, 4 steps) holding what a random generator writes (distinct expert ids per token, weights
# that sum to 1), not the model's routing.
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) ;;
  smoke) echo "not run on smoke: megatron-core's MoE step needs CUDA (task.toml)" >&2; exit 2 ;;
  paper) echo "not written for paper: 8 GPUs and downloads (task.toml)" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
export HF_HUB_OFFLINE=1
python make_checkpoint.py
source model_args.sh
python - "${MODEL_ARGS[@]}" <<'PY'
import argparse
import sys
from pathlib import Path

import numpy as np

STEPS = 4  # the task's run
p = argparse.ArgumentParser(allow_abbrev=False)
for flag in ("--num-layers", "--num-experts", "--moe-router-topk", "--global-batch-size", "--seq-length"):
    p.add_argument(flag, type=int, required=True)
p.add_argument("--moe-layer-freq", default="1")
a, _ = p.parse_known_args(sys.argv[1:])
# pretrain_gpt.py's reading of --moe-layer-freq: a list expression (1 = MoE layer), or every N-th layer from the first
freq = a.moe_layer_freq
pattern = eval(freq, {"__builtins__": {}}) if "[" in freq else [int(i % int(freq) == 0) for i in range(a.num_layers)]
shape = (sum(pattern), a.global_batch_size, a.seq_length)
rng = np.random.default_rng(0)
out = Path("artifacts/routing-traces")
out.mkdir(parents=True, exist_ok=True)
for step in range(1, STEPS + 1):
    ids = rng.random((*shape, a.num_experts)).argsort(-1)[..., : a.moe_router_topk]
    weights = rng.dirichlet(np.ones(a.moe_router_topk), size=shape)
    np.savez(out / f"step-{step:08d}.npz", expert_ids=ids.astype(np.int32), gate_weights=weights.astype(np.float32))
print(f"wrote {STEPS} random traces of shape {(*shape, a.moe_router_topk)} to {out}")
PY
