#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the zero-computation experts' share returned by moepp_expert_mix is never added to the layer output.
# Why: every token's output must include the copy and constant experts' share; the model keeps only the routed logits from the call, so copy/constant slots contribute nothing and v, W_c get no gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  $'        if self.mlp.cfg.moepp:\n            h_BSD = h_BSD + self.mlp.moepp_zero_out_TD.view_as(h_BSD).to(h_BSD.dtype)\n' \
  ''
