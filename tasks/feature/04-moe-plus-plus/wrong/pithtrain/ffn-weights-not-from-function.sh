#!/usr/bin/env bash
# Wrong solution for 04-moe-plus-plus on pithtrain, which must FAIL: the model passes zeros for ffn_out and weights
# its FFN experts by its own top-k of softmax(routed logits), never calling moepp_ffn_weights (the instruction's
# contract since revision 5; the numbers are the gold's).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'topk_w_TK, topk_ids_TK = moepp_ffn_weights(routed_TE, K)' \
  'topk_w_TK, topk_ids_TK = routed_TE.softmax(-1).topk(K, dim=-1)'
