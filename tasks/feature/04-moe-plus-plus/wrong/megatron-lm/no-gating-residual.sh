#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on megatron-lm, which must FAIL: no gating residual (the routed logits are the layer's
# own router logits).
# Why: MoE++'s router logits add W_g times the previous MoE layer's routed logits in every MoE layer but the first.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/moe-plus-plus.patch" \
  'routed_logits = logits if prev_logits is None else logits + prev_logits @ residual_weight.t()' \
  'routed_logits = logits'
