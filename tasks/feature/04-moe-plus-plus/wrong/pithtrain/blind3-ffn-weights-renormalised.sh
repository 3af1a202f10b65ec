#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the FFN experts' top-k weights are renormalised to sum to 1 over the chosen experts.
# Why: The instruction says each chosen expert is weighted by its probability, not renormalised; DeepSeek-V2's norm_topk_prob habit makes renormalising the routed weights a plausible carry-over, and it only touches the FFN share (the zero-computation share comes from the op).
# Revision 5 named the FFN weights' function (moepp_ffn_weights): the same mistake, made on what it returns.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  $'topk_w_TK, topk_ids_TK = moepp_ffn_weights(routed_TE, K)  # the op\'s own choice, recomputed' \
  $'topk_w_TK, topk_ids_TK = moepp_ffn_weights(routed_TE, K)  # the op\'s own choice, recomputed\n        topk_w_TK = topk_w_TK / topk_w_TK.sum(-1, keepdim=True)'
