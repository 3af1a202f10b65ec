#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: each head's RMS-normalised output is not scaled by (1 - lambda_init).
# Why: The paper scales the normalised head output by (1 - lambda_init) to align gradients with the standard Transformer; it is easy to drop as a cosmetic constant (the learnable norm weight could absorb it), but it changes the function's output.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'return (o_BSHE * (1 - lambda_init)).to(v.dtype)' \
  'return o_BSHE.to(v.dtype)'
