#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the zero-computation experts' share y is added to the residual detached, so no gradient reaches the router, W_g, v or W_c through it.
# Why: y must be differentiable and its gradient must flow to the router logits and the constant experts' parameters; an agent treating the extra term like a precomputed constant (or detaching to silence a double-backward error) cuts it.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'self.mlp.moepp_zero_out_TD.view_as(h_BSD)' \
  'self.mlp.moepp_zero_out_TD.detach().view_as(h_BSD)'
