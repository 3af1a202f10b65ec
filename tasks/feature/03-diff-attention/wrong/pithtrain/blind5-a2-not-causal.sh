#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the second attention map A2 is computed without the causal mask.
# Why: Both A1 and A2 must be causal softmax attention; forgetting is_causal on one of two near-identical SDPA calls lets tokens see the future through -lambda A2 V, and loss still falls.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'a2v_BHSE = F.scaled_dot_product_attention(q2, k2, v, is_causal=True)' \
  'a2v_BHSE = F.scaled_dot_product_attention(q2, k2, v)'
