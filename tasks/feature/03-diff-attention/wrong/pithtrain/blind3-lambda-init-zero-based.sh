#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: each layer's lambda_init is computed from its 0-based index (l = 0 for the first layer), not l counted from 1.
# Why: lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) with l counted from 1; passing the 0-based layer index of the ModuleDict (the reference code's depth starts at 0 with its own formula) shifts every layer's lambda_init and output scale, and the first layer gets a negative one, yet it trains.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'layer.self_attn.lambda_init = lambda_init_for_layer(int(i) + 1)' \
  'layer.self_attn.lambda_init = lambda_init_for_layer(int(i))'
