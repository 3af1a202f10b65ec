#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the four lambda vectors are initialised to zero instead of N(0, 0.1^2); at zero their gradient vanishes, so they never learn.
# Why: The lambda vectors are initialised from N(0, 0.1^2) (gold); with zeros, d exp(<q,k>)/dq = k exp(.) = 0 and
# likewise for k, so lambda stays at lambda_init forever.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'p.normal_(0.0, 0.1, generator=g)' \
  'p.zero_()'
