#!/usr/bin/env bash
# Gold for feature-01 on torchtitan: MoBA as model.moba in TorchTitan 0.2.2's DeepSeek-V3 MLA attention (moba.patch:
# job config fields copied into DeepSeekV3ModelArgs, moba_attention called on q and k after RoPE), and feature.json
# with the block size that cuts the profile's sequence (verify.sh prints it) into 8 blocks, top-3 as the task asks.
set -euo pipefail
git apply "$GOLD_DIR/moba.patch"
seq_len=$(sed -n 's/.*sequence length: \([0-9][0-9]*\).*/\1/p' verify.sh | head -n 1)
[ -n "$seq_len" ] || { echo "verify.sh prints no 'sequence length: N'" >&2; exit 1; }
mkdir -p artifacts
printf '{"op": "torchtitan.models.deepseek_v3.model.model:moba_attention", "enable": ["--model.moba", "--model.moba-block-size", "%d", "--model.moba-top-k", "3"], "disable": ["--model.no-moba"]}\n' \
  $((seq_len / 8)) > artifacts/feature.json
