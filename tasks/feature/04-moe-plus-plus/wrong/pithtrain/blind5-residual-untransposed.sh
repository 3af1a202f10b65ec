#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the gating residual adds prev_logits @ W_g instead of prev_logits @ W_g^T (i.e. W_g^T times the previous logits).
# Why: the rule is logits + W_g times the previous layer's routed logits; with row-vector tokens that is prev @ W_g.T, and dropping the transpose (a common row/column slip, and it still type-checks since W_g is square) uses the transposed matrix.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'prev_logits_TE @ residual_weight_EE.T' \
  'prev_logits_TE @ residual_weight_EE'
