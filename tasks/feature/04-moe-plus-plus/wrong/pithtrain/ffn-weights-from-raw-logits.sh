#!/usr/bin/env bash
# Wrong solution for 04-moe-plus-plus on pithtrain, which must FAIL: the FFN experts' weights come from the layer's
# raw router logits, before the gating residual (the op routes the zero-computation experts by the routed ones).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'topk_w_TK, topk_ids_TK = moepp_ffn_weights(routed_TE, K)' \
  'topk_w_TK, topk_ids_TK = moepp_ffn_weights(logits_TE, K)'
