#!/usr/bin/env bash
# Gold for feature-02 on pithtrain: DynMoE top-any gating as model.dynmoe in DeepSeek-V2's MoE layers
# (dynmoe.patch), and feature.json.
set -euo pipefail
git apply "$GOLD_DIR/dynmoe.patch"
mkdir -p artifacts
cp "$GOLD_DIR/feature.json" artifacts/feature.json
