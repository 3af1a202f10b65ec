#!/usr/bin/env bash
# Gold for feature-04 on pithtrain: MoE++ as model.moepp in DeepSeek-V2's MoE layers (moe-plus-plus.patch), and
# feature.json.
set -euo pipefail
git apply "$GOLD_DIR/moe-plus-plus.patch"
mkdir -p artifacts
cp "$GOLD_DIR/feature.json" artifacts/feature.json
