#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the gating residual mixes in W_g times softmax(previous routed logits) rather than the previous routed logits.
# Why: the instruction says the residual adds W_g times the previous MoE layer's (routed) LOGITS; the paper summary's wording "previous layer's routing scores" invites an agent to feed the probabilities instead.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'logits_TE + prev_logits_TE @' \
  'logits_TE + prev_logits_TE.softmax(-1) @'
