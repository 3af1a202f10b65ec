#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the gating residual adds prev_logits @ W_g (that is W_g^T times the previous logits) instead of W_g times them.
# Why: The rule is logits + W_g prev; with row-major [tokens, experts] logits that is prev @ W_g^T (nn.Linear's convention); dropping the transpose is a one-character slip that still trains since W_g is learnable, but computes a different function of the W_g it is given.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'logits_TE + prev_logits_TE @ residual_weight_EE.T' \
  'logits_TE + prev_logits_TE @ residual_weight_EE'
