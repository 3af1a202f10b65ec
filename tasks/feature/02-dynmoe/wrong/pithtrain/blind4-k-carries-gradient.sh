#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: divides by the sum of the straight-through activations instead of the detached count, so k carries gradient.
# Why: the instruction says the combine weight is 1/k with k carrying no gradient; active_TE.sum() equals k in the forward, so it looks identical, but the backward differs.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'active_TE / k_T1.clamp(min=1)' \
  'active_TE / active_TE.sum(-1, keepdim=True).clamp(min=1)'
