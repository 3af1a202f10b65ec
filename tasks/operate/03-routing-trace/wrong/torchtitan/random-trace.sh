#!/usr/bin/env bash
# FAILs for: not the model's routing
# Wrong: on gpu1 the provided weights are made first (make_checkpoint.py, as the task says), then four trace files of
# the right names, keys, dtypes and shapes, holding what a random generator writes (distinct expert ids per token,
# weights that sum to 1), not the model's routing. The shape is read the TorchTitan way: the MoE layers, experts and
# top_k from the provided flavor (its module, the job config's custom import), batch, sequence and steps from the job
# config's [training].
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) config=gpu1.toml
    python make_checkpoint.py ;;
  smoke) config=smoke.toml ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python - "$config" <<'PY'
import importlib
import sys
import tomllib
from pathlib import Path

import numpy as np
from torchtitan.models.deepseek_v3 import deepseekv3_args

job = tomllib.loads(Path(sys.argv[1]).read_text())
importlib.import_module(job["experimental"]["custom_import"])
flavor, t = deepseekv3_args[job["model"]["flavor"]], job["training"]
k, experts = flavor.moe_args.top_k, flavor.moe_args.num_experts
shape = (flavor.n_layers - flavor.n_dense_layers, t["local_batch_size"], t["seq_len"])
rng = np.random.default_rng(0)
out = Path("artifacts/routing-traces")
out.mkdir(parents=True, exist_ok=True)
for step in range(1, t["steps"] + 1):
    ids = rng.random((*shape, experts)).argsort(-1)[..., :k]
    weights = rng.dirichlet(np.ones(k), size=shape)
    np.savez(out / f"step-{step:08d}.npz", expert_ids=ids.astype(np.int32), gate_weights=weights.astype(np.float32))
PY
