#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the previous MoE layer's routed logits enter the gating residual detached.
# Why: the gating residual is part of the graph (W_g times the previous layer's routed logits), so the previous router learns through it; detaching to keep layers' graphs apart is a plausible habit.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'prev_TE = self.moepp_previous[0].moepp_routed_TE if' \
  'prev_TE = self.moepp_previous[0].moepp_routed_TE.detach() if'
