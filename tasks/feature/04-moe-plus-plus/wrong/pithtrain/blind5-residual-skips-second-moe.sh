#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the gating-residual chain starts one layer late (first_k_dense_replace + 1), so the second MoE layer gets no previous logits (in the smoke model no layer gets the residual).
# Why: an off-by-one at the dense/MoE boundary: the first MoE layer is index first_k_dense_replace, not first_k_dense_replace + 1; every MoE layer after the first must add W_g times the previous one's routed logits.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'moe_blocks = [layer.mlp for layer in self.layers.values() if isinstance(layer.mlp, DeepseekV2Moe)]' \
  'moe_blocks = [layer.mlp for layer in list(self.layers.values())[cfg.first_k_dense_replace + 1 :]]'
