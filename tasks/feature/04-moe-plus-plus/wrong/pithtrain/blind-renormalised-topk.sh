#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the top-k routing weights are renormalised to sum to 1 instead of being the raw softmax probabilities.
# Why: MoE++ weights each of the top-k experts by its softmax probability over all experts, not renormalised (gold
# returns the top-k probabilities as they are); dividing by their sum renormalises them.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  $'    return routed_TE, topk_ids_TK, topk_w_TK\n' \
  $'    return routed_TE, topk_ids_TK, topk_w_TK / topk_w_TK.sum(-1, keepdim=True)\n'
