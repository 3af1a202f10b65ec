#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the gating residual adds W_g times the previous layer's softmax probabilities instead of its routed logits.
# Why: instruction: the router logits add W_g times the previous MoE layer's (routed) logits; feeding the probabilities (softmax of them) changes the residual's scale and its gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'else logits_TE + prev_logits_TE @ residual_weight_EE.T' \
  'else logits_TE + prev_logits_TE.softmax(-1) @ residual_weight_EE.T'
