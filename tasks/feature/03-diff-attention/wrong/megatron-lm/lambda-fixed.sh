#!/usr/bin/env bash
# Near miss for 03-diff-attention on megatron-lm, which must FAIL: the gold with one rule broken (lambda is fixed at lambda_init).
# Why: lambda = exp(<lambda_q1, lambda_k1>) - exp(<lambda_q2, lambda_k2>) + lambda_init is learned (gold adds the
# exponentials); fixed at lambda_init, the four lambda vectors neither shape the output nor get a gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/diff-attention.patch" \
  $'    out = attend(q1, k1) - lam * attend(q2, k2)\n' \
  $'    lam = lambda_init  # fixed, never learned\n    out = attend(q1, k1) - lam * attend(q2, k2)\n'
