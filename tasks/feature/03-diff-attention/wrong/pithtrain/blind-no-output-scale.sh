#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the per-head output is RMS-normalised but not scaled by (1 - lambda_init).
# Why: Each head's normalised output must be multiplied by (1 - lambda_init) (gold does); here the scale is left out,
# so outputs are larger by 1/(1 - lambda_init).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'return (o_BSHE * (1 - lambda_init)).to(v.dtype)' \
  'return o_BSHE.to(v.dtype)'
