#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: each head's normalised output is not scaled by (1 - lambda_init).
# Why: instruction/paper: each head's output is RMS-normalised and scaled by (1 - lambda_init); leaving the scale out changes every layer's attention output magnitude (x1.25 to x5 in smoke).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'return (o_BSHE * (1 - lambda_init)).to(v.dtype)' \
  'return o_BSHE.to(v.dtype)'
