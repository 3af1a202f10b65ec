#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the load-balancing loss uses softmax of the layer's own logits, before the gating residual.
# Why: the instruction: the load-balancing loss is computed on softmax(routed logits), the probabilities the layer routes by; using the pre-residual logits (which are at hand in the same function) mismatches the routing in every MoE layer after the first.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'routed_TE.softmax(-1).view(B, S, -1)' \
  'logits_TE.softmax(-1).view(B, S, -1)'
