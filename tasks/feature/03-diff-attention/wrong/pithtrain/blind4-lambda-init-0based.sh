#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: each layer's lambda_init uses the 0-based layer index (l = i instead of i + 1).
# Why: lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) counts layers from 1; passing the 0-based index shifts every layer's lambda_init and output scale (layer 1 gets 0.8 - 0.6 e^0.3 < 0).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'lambda_init_for_layer(int(i) + 1)' \
  'lambda_init_for_layer(int(i))'
