#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda is turned into a Python float (.item()), so the four lambda vectors get no gradient and never learn.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  $'    lam = lam + lambda_init\n' \
  $'    lam = (lam + lambda_init).item()\n'
