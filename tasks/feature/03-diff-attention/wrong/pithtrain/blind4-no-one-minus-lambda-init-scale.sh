#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the RMS-normalised head output is not scaled by (1 - lambda_init).
# Why: the paper scales each head's normalised output by (1 - lambda_init); an agent treating the RMSNorm as the end of the head drops it, and training still works.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'return (o_BSHE * (1 - lambda_init)).to(v.dtype)' \
  'return o_BSHE.to(v.dtype)'
