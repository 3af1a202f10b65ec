#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda is turned into a Python float with .item() before it scales A2 V, so the lambda vectors get no gradient.
# Why: The four lambda vectors must be learnable (gradients reaching them); .item() for a 'scalar' is a common agent habit and training still runs.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'lam = lam + lambda_init' \
  'lam = lam.item() + lambda_init'
