#!/usr/bin/env bash
# Gold for feature-01 on pithtrain: MoBA as model.moba in DeepSeek-V2's attention (moba.patch), and feature.json with
# the block size that cuts the profile's sequence (verify.sh prints it) into 8 blocks, top-3 as the task asks.
set -euo pipefail
git apply "$GOLD_DIR/moba.patch"
seq_len=$(sed -n 's/.*sequence length: \([0-9][0-9]*\).*/\1/p' verify.sh | head -n 1)
[ -n "$seq_len" ] || { echo "verify.sh prints no 'sequence length: N'" >&2; exit 1; }
mkdir -p artifacts
printf '{"op": "pithtrain.models.deepseek_v2:moba_attention", "enable": ["--set", "model.moba=true", "--set", "model.moba_block_size=%d", "--set", "model.moba_top_k=3"], "disable": ["--set", "model.moba=false"]}\n' \
  $((seq_len / 8)) > artifacts/feature.json
