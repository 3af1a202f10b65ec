#!/usr/bin/env bash
# Near miss for 03-diff-attention on torchtitan, which must FAIL: the gold with one rule broken (lambda_init is 0.8 in every layer, not depth-dependent).
# Why: lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) for layer l (gold's TransformerBlock sets its own attention's); a
# constant 0.8 (the schedule's limit) is wrong for every layer, most for the first ones.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/diff-attention.patch" \
  'self.attention.lambda_init = lambda_init_for_layer(layer_id + 1)' \
  'self.attention.lambda_init = 0.8'
