#!/usr/bin/env bash
# Gold for feature-03 on pithtrain: differential attention as model.diff_attention in DeepSeek-V2's MLA
# (diff-attention.patch), and feature.json.
set -euo pipefail
git apply "$GOLD_DIR/diff-attention.patch"
mkdir -p artifacts
cp "$GOLD_DIR/feature.json" artifacts/feature.json
