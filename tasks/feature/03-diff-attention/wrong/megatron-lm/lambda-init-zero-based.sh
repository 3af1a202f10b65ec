#!/usr/bin/env bash
# Near miss for 03-diff-attention on megatron-lm, which must FAIL: the gold with one rule broken (lambda_init from a 0-based layer index).
# Why: the paper counts l from 1, as Megatron's layer_number does (gold passes it as it is); passing layer_number - 1
# gives every layer the previous layer's value (the first layer 0.8 - 0.6 e^0.3 < 0 instead of 0.2).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/diff-attention.patch" \
  'self.diff_lambda_init = diff_attention_lambda_init(self.layer_number)' \
  'self.diff_lambda_init = diff_attention_lambda_init(self.layer_number - 1)'
