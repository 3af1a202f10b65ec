#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: lambda is detached before use, so the four lambda vectors never receive gradients.
# Why: The lambda vectors must be learnable (the function must be differentiable in every tensor argument); detaching the re-parameterised lambda (e.g. to treat it as a per-layer constant scalar) freezes them silently.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'lam = lam + lambda_init' \
  'lam = lam.detach() + lambda_init'
