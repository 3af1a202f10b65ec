#!/usr/bin/env bash
# Gold for feature-04 on torchtitan: MoE++ as model.moepp (job config, copied into the DeepSeek-V3 model args) in
# TorchTitan's MoE layers (moe-plus-plus.patch), its load-balancing loss added to the trained loss, and feature.json.
# The same on every profile: the switch is --model.moepp, and MoE++ takes its zero-computation experts out of the
# flavor's routed experts.
set -euo pipefail
git apply "$GOLD_DIR/moe-plus-plus.patch"
mkdir -p artifacts
cp "$GOLD_DIR/feature.json" artifacts/feature.json
