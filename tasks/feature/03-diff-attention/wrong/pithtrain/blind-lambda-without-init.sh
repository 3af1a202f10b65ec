#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda leaves out lambda_init: lambda = exp(<lq1, lk1>) - exp(<lq2, lk2>) only.
# Why: lambda = exp(<lambda_q1, lambda_k1>) - exp(<lambda_q2, lambda_k2>) + lambda_init (gold adds lambda_init);
# without it lambda starts near 0 and the second attention map is barely subtracted.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  $'    lam = lam + lambda_init\n' \
  $'    # lambda_init enters through the (1 - lambda_init) output scale below\n'
