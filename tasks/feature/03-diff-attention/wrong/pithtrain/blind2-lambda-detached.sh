#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda is detached before use, so the four lambda vectors get no gradient.
# Why: instruction: the four lambda vectors are learnable and the function must be differentiable in every tensor argument; detaching the reparameterised lambda freezes them at their init.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'lam = lam + lambda_init' \
  'lam = lam.detach() + lambda_init'
