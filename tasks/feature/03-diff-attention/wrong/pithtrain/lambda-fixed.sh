#!/usr/bin/env bash
# Wrong solution for 03-diff-attention on pithtrain, which must FAIL: the gold with one rule broken (lambda is fixed at lambda_init).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  $'    lam = lam + lambda_init\n' \
  $'    lam = lambda_init  # fixed, never learned\n'
