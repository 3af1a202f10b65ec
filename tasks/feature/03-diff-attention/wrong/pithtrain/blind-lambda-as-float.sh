#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda is turned into a Python float (.item()), so the four lambda vectors get no gradient and never learn.
# Why: lambda must stay a tensor in the graph so lambda_q1, lambda_k1, lambda_q2, lambda_k2 learn (gold keeps it a
# tensor); .item() detaches it: the forward is right but the lambda vectors have no gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  $'    lam = lam + lambda_init\n' \
  $'    lam = (lam + lambda_init).item()\n'
