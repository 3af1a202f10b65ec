#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda_init is computed with the layer counted from 0, not from 1 (off by one layer).
# Why: lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) with l the layer counted from 1 (gold passes index + 1); passing the
# 0-based index gives every layer the previous layer's value (layer 1 gets -0.01 instead of 0.2).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'lambda_init_for_layer(int(i) + 1)' \
  'lambda_init_for_layer(int(i))'
