#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: each MoE layer hands the next one its raw router logits (before its own gating residual) instead of its routed logits.
# Why: The gating residual reads the previous MoE layer's routed logits (after that layer's own residual), so the residual chains through the layers; storing the gate's raw output is a natural reading of 'the previous layer's router logits' and trains fine.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'self.moepp_routed_TE = routed_TE' \
  'self.moepp_routed_TE = logits_TE'
