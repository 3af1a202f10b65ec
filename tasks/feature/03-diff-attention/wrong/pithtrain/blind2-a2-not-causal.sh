#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the second softmax map A2 is computed without the causal mask.
# Why: instruction/paper: A_j is the causal softmax attention of (Q_j, K_j) for both j; A2 without the mask lets every position read future values (through lambda A2 V).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'a2v_BHSE = F.scaled_dot_product_attention(q2, k2, v, is_causal=True)' \
  'a2v_BHSE = F.scaled_dot_product_attention(q2, k2, v)'
