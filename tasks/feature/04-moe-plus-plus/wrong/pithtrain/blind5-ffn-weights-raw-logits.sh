#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: moepp_ffn_weights is called on the layer's own logits, not on the routed logits moepp_expert_mix returned.
# Why: the instruction says the model calls moepp_ffn_weights on the routed logits moepp_expert_mix returned; passing the raw gate logits drops the gating residual from the FFN experts' choice and weights in every MoE layer after the first.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'moepp_ffn_weights(routed_TE, K)' \
  'moepp_ffn_weights(logits_TE, K)'
