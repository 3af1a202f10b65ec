#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the four lambda vectors are initialised with standard deviation 0.01 (0.1^2 read as the std) instead of 0.1.
# Why: N(0, 0.1^2) means variance 0.1^2, std 0.1; passing 0.1^2 = 0.01 to normal_ (which takes the std) is a classic misreading; lambda then starts almost exactly at lambda_init.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'p.normal_(0.0, 0.1, generator=g)' \
  'p.normal_(0.0, 0.1**2, generator=g)'
