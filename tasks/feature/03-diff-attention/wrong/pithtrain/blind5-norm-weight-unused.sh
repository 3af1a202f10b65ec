#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the per-head RMS norm ignores norm_weight, so the learnable norm weight is never used and gets no gradient.
# Why: The instruction requires a learnable weight of size v_head_dim; a parameter-free rms norm is an easy slip and the run is otherwise fine.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  ' * norm_weight.float()' \
  ''
