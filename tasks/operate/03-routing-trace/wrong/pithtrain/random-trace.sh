#!/usr/bin/env bash
# FAILs for: not the model's routing
# Wrong: on gpu1 the provided weights are made first (make_checkpoint.py, as the task says), then four trace files of
# the right names, keys, dtypes and shapes, holding what a random generator writes (distinct expert ids per token,
# weights that sum to 1), not the model's routing. Without the weights the checker FAILs before it looks at a trace.
set -euo pipefail
if [ "$ATE_PROFILE" = gpu1 ]; then python make_checkpoint.py; fi
python - <<'PY'
import tomllib
from pathlib import Path

import numpy as np

cfg = tomllib.loads(Path("routing.toml").read_text())
m, t = cfg["model"], cfg["training"]
layers = m["num_hidden_layers"] - m["first_k_dense_replace"]
shape = (layers, t["global_batch_size"], cfg["data"]["seq_len"])
rng = np.random.default_rng(0)
out = Path("artifacts/routing-traces")
out.mkdir(parents=True, exist_ok=True)
for step in range(1, t["max_steps"] + 1):
    ids = rng.random((*shape, m["n_routed_experts"])).argsort(-1)[..., : m["num_experts_per_tok"]]
    weights = rng.dirichlet(np.ones(m["num_experts_per_tok"]), size=shape)
    np.savez(out / f"step-{step:08d}.npz", expert_ids=ids.astype(np.int32), gate_weights=weights.astype(np.float32))
PY
