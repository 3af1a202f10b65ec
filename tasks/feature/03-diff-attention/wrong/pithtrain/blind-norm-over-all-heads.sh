#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the RMS norm is taken over all heads together (the whole [heads, v_head_dim] vector) instead of per head.
# Why: Each head's output is RMS-normalised on its own (mean of squares over v_head_dim, gold's mean(-1)); averaging
# over heads and v_head_dim together is a layer-wide norm, the wrong dimension.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'o_BHSE.pow(2).mean(-1, keepdim=True)' \
  'o_BHSE.pow(2).mean((-2, -1), keepdim=True)'
