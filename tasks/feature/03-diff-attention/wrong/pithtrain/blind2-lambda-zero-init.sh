#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the four lambda vectors are initialised to zero instead of N(0, 0.1^2).
# Why: instruction/paper: the lambda vectors are initialised from N(0, 0.1^2); at zero, d/dlambda_q = exp(<lq, lk>) lambda_k = 0 (and likewise for lambda_k), so the vectors never move and lambda stays at lambda_init.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'p.normal_(0.0, 0.1, generator=g)' \
  'p.zero_()'
