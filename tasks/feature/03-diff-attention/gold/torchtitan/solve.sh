#!/usr/bin/env bash
# Gold for feature-03 on torchtitan: differential attention as model.diff_attention (a JobConfig field copied into
# DeepSeekV3ModelArgs) in TorchTitan 0.2.2's DeepSeek-V3 MLA (diff-attention.patch), and feature.json. Nothing in it
# depends on the profile (smoke or gpu1).
set -euo pipefail
git apply "$GOLD_DIR/diff-attention.patch"
mkdir -p artifacts
cp "$GOLD_DIR/feature.json" artifacts/feature.json
