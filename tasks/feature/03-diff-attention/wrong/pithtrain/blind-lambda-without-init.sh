#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda leaves out lambda_init: lambda = exp(<lq1, lk1>) - exp(<lq2, lk2>) only.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  $'    lam = lam + lambda_init\n' \
  $'    # lambda_init enters through the (1 - lambda_init) output scale below\n'
