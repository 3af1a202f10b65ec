#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on megatron-lm, which must FAIL: the FFN experts' weights come from the layer's raw
# router logits, before the gating residual (the op routes the zero-computation experts by the routed ones).
# Why: the instruction: moepp_ffn_weights is called on the routed logits moepp_expert_mix returned.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/moe-plus-plus.patch" \
  'weights, ids = moepp_ffn_weights(routed_logits, top_k)' \
  'weights, ids = moepp_ffn_weights(logits, top_k)'
