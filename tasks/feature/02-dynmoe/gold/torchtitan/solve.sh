#!/usr/bin/env bash
# Gold for feature-02 on torchtitan: DynMoE top-any gating in TorchTitan 0.2.2's MoE router (dynmoe.patch):
# job-config fields model.dynmoe (off by default), model.dynmoe_k_max (12) and model.dynmoe_aux_loss_coef (1e-2, as
# the pithtrain gold's aux_loss_coef), copied into the DeepSeek-V3 model's MoEArgs; the auxiliary loss is added to
# the training loss that TorchTitan logs and backpropagates (train.py); and feature.json. The same on every profile.
set -euo pipefail
git apply "$GOLD_DIR/dynmoe.patch"
mkdir -p artifacts
cat > artifacts/feature.json <<'JSON'
{"op": "torchtitan.models.moe.moe:dynmoe_gate", "aux": "torchtitan.models.moe.moe:dynmoe_aux_loss", "enable": ["--model.dynmoe"], "disable": ["--model.no-dynmoe"]}
JSON
