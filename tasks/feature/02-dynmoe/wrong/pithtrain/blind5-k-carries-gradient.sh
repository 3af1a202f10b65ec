#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: k is the sum of the straight-through activations, so it carries gradient into the 1/k weights (forward values unchanged).
# Why: the instruction says k carries no gradient; summing the activations instead of counting them detached is the obvious way to write k and changes only the backward pass.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'k_T1 = (active_TE.detach() > 0).sum(-1, keepdim=True)' \
  'k_T1 = active_TE.sum(-1, keepdim=True)'
