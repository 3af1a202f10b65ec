#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: moepp_ffn_weights renormalises the top-k probabilities to sum to 1.
# Why: the instruction says each chosen expert is weighted by its probability, not renormalised; DeepSeek's norm_topk_prob habit makes an agent renormalise, and the FFN share then disagrees with the zero-computation share in y.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  '    return routed_logits.softmax(-1).topk(top_k, dim=-1)' \
  $'    w_TK, ids_TK = routed_logits.softmax(-1).topk(top_k, dim=-1)\n    return w_TK / w_TK.sum(-1, keepdim=True), ids_TK'
