#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the gating residual multiplies by W_g transposed (prev @ W_g instead of prev @ W_g^T).
# Why: instruction: add W_g times the previous layer's logits, i.e. logits + W_g l_prev (row form l_prev @ W_g^T); using W_g^T routes expert j's previous logit into expert i through W_g[j, i] instead of W_g[i, j].
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'else logits_TE + prev_logits_TE @ residual_weight_EE.T' \
  'else logits_TE + prev_logits_TE @ residual_weight_EE'
