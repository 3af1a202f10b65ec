#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda is exp(<lq1,lk1>) - exp(<lq2,lk2>) without + lambda_init; lambda_init only enters the output scale.
# Why: the paper's re-parameterised lambda adds lambda_init; without it lambda starts near 0 and the second map is barely subtracted.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'lam = lam + lambda_init' \
  'lam = lam * 1.0  # lambda_init enters through the (1 - lambda_init) output scale'
