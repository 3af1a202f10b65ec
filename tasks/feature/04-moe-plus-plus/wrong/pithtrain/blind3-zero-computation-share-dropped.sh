#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the op's y (the zero, copy and constant experts' share) is computed but never added to the layer output; only its routed logits are used.
# Why: Every token's output must include the zero-computation experts' share; an agent that passes zeros for ffn_out, keeps the routed logits for routing and forgets to add y back in stage 1 (the FFN path looks complete) turns copy and constant experts into zero experts, and v and W_c get no gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  $'        if self.mlp.cfg.moepp:\n            h_BSD = h_BSD + self.mlp.moepp_zero_out_TD.view_as(h_BSD).to(h_BSD.dtype)\n' \
  ''
