#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda_init uses the 0-based layer index, l = 0 for the first layer.
# Why: instruction/paper: lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) for layer l counted from 1; with the 0-based index every layer gets the previous layer's value (the first layer about -0.01 instead of 0.2).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'layer.self_attn.lambda_init = lambda_init_for_layer(int(i) + 1)' \
  'layer.self_attn.lambda_init = lambda_init_for_layer(int(i))'
