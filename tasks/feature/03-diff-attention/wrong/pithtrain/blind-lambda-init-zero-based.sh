#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda_init is computed with the layer counted from 0, not from 1 (off by one layer).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'lambda_init_for_layer(int(i) + 1)' \
  'lambda_init_for_layer(int(i))'
