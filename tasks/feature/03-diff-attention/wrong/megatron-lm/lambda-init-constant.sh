#!/usr/bin/env bash
# Near miss for 03-diff-attention on megatron-lm, which must FAIL: the gold with one rule broken (lambda_init is 0.8 in every layer, not depth-dependent).
# Why: lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) for layer l (gold takes the attention's own layer_number); a
# constant 0.8 (the schedule's limit) is wrong for every layer, most for the first ones.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/diff-attention.patch" \
  'self.diff_lambda_init = diff_attention_lambda_init(self.layer_number)' \
  'self.diff_lambda_init = 0.8'
