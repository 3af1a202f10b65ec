#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the per-head RMS-normalised output is not multiplied by (1 - lambda_init).
# Why: The paper scales each head's normalised output by (1 - lambda_init); an agent may think the learnable norm weight makes it redundant and drop it.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'return (o_BSHE * (1 - lambda_init)).to(v.dtype)' \
  'return o_BSHE.to(v.dtype)'
