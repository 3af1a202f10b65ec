#!/usr/bin/env bash
# Wrong solution for 03-diff-attention on pithtrain, which must FAIL: the gold with one rule broken (lambda_init is 0.8 in every layer, not depth-dependent).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'layer.self_attn.lambda_init = lambda_init_for_layer(int(i) + 1)' \
  'layer.self_attn.lambda_init = 0.8'
