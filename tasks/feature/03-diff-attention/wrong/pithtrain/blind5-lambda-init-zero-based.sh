#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda_init is computed from the 0-based layer index (layer 0 gets 0.8 - 0.6 e^0.3 < 0).
# Why: The paper counts l from 1; the ModuleDict keys are 0-based and an agent passing the key straight in is an off-by-one.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'lambda_init_for_layer(int(i) + 1)' \
  'lambda_init_for_layer(int(i))'
