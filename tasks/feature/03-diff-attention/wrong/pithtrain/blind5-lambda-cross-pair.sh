#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the second lambda term uses <lambda_q2, lambda_k1> instead of <lambda_q2, lambda_k2>, so lambda_k2 never trains.
# Why: lambda = exp(<lq1, lk1>) - exp(<lq2, lk2>) + lambda_init; a one-character typo in the pairing keeps everything running and lambda_k2 is silently unused.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  '(lambda_q2.float() * lambda_k2.float())' \
  '(lambda_q2.float() * lambda_k1.float())'
