#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the per-head RMS norm has no learnable weight (norm_weight is ignored).
# Why: instruction: each head's output is RMS-normalised with a learnable weight of size v_head_dim, and the function must be differentiable in every tensor argument; dropping the weight leaves norm_weight without gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  '+ eps) * norm_weight.float()' \
  '+ eps)'
