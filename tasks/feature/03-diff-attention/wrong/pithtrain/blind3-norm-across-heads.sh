#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the RMS norm is taken over all heads' outputs of a token together, not per head.
# Why: The rule is a per-head RMS norm (GroupNorm by head in the reference); normalising over the heads and their v_head_dim together (a LayerNorm-like norm on the flattened output) is a wrong-axis mistake that trains fine.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'o_BHSE * torch.rsqrt(o_BHSE.pow(2).mean(-1, keepdim=True) + eps)' \
  'o_BHSE * torch.rsqrt(o_BHSE.pow(2).mean((-2, -1), keepdim=True) + eps)'
