#!/usr/bin/env bash
# Near miss for 03-diff-attention on torchtitan, which must FAIL: the gold with one rule broken (lambda_init from a 0-based layer index).
# Why: the paper counts l from 1 and TorchTitan's layer_id from 0 (gold passes layer_id + 1); passing layer_id gives
# every layer the previous layer's value (the first layer 0.8 - 0.6 e^0.3 < 0 instead of 0.2).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/diff-attention.patch" \
  'self.attention.lambda_init = lambda_init_for_layer(layer_id + 1)' \
  'self.attention.lambda_init = lambda_init_for_layer(layer_id)'
