#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the gating residual multiplies the previous logits by W_g transposed (prev @ W_g instead of W_g prev).
# Why: The residual adds W_g times the previous layer's routed logits, i.e. prev_logits @ W_g^T for row vectors
# (gold); prev_logits @ W_g applies the transpose of W_g.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'prev_logits_TE @ residual_weight_EE.T' \
  'prev_logits_TE @ residual_weight_EE'
