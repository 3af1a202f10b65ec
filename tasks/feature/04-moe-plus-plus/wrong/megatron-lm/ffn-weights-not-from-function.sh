#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on megatron-lm, which must FAIL: the model passes zeros for ffn_out and weights its FFN
# experts by its own top-k of softmax(routed logits), never calling moepp_ffn_weights (the numbers are the gold's).
# Why: the instruction: a model that passes zeros takes the chosen experts and their weights from moepp_ffn_weights,
# called by that name in every MoE layer.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/moe-plus-plus.patch" \
  'weights, ids = moepp_ffn_weights(routed_logits, top_k)' \
  'weights, ids = torch.softmax(routed_logits, dim=-1).topk(top_k, dim=-1)'
