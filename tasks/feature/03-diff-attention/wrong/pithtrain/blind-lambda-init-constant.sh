#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: every layer uses the constant lambda_init = 0.8 instead of the per-layer schedule 0.8 - 0.6 exp(-0.3 (l - 1)).
# Why: lambda_init follows the layer schedule 0.8 - 0.6 exp(-0.3 (l - 1)) (gold sets each layer's own value); a
# constant 0.8 (the schedule's limit) is wrong for every layer, most for the first ones.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'layer.self_attn.lambda_init = lambda_init_for_layer(int(i) + 1)' \
  'layer.self_attn.lambda_init = 0.8'
