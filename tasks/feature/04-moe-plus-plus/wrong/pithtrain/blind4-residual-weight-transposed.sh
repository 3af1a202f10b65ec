#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the gating residual multiplies by W_g^T instead of W_g (prev_logits @ W instead of prev_logits @ W^T).
# Why: W_g times the logit vector per token is prev @ W_g.T for a [E, E] weight; dropping the .T is the usual axis slip and trains the same.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'prev_logits_TE @ residual_weight_EE.T' \
  'prev_logits_TE @ residual_weight_EE'
