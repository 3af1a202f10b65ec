#!/usr/bin/env bash
# Wrong: four trace files of the right names, keys, dtypes and shapes, holding what a random generator writes
# (distinct expert ids per token, weights that sum to 1), not the model's routing.
set -euo pipefail
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
