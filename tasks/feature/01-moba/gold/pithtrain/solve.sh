#!/usr/bin/env bash
# Gold for feature-01 on pithtrain: MoBA as model.moba in DeepSeek-V2's attention (moba.patch), and feature.json.
set -euo pipefail
git apply "$GOLD_DIR/moba.patch"
mkdir -p artifacts
cp "$GOLD_DIR/feature.json" artifacts/feature.json
