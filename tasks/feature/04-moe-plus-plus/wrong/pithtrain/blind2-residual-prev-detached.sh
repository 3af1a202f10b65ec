#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the previous MoE layer's routed logits are detached before the gating residual.
# Why: instruction: a layer's router logits add W_g times the previous MoE layer's routed logits, and the op must be differentiable in every tensor argument (prev_logits included); detaching stops the next layer's routing gradient from reaching the previous layer's router and W_g.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'prev_TE = self.moepp_previous[0].moepp_routed_TE if self.moepp_previous else None' \
  'prev_TE = self.moepp_previous[0].moepp_routed_TE.detach() if self.moepp_previous else None'
