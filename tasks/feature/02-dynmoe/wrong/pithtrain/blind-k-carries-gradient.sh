#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: k, the number of active experts, is computed from the straight-through activations and carries gradient.
# Why: The combine weight 1/k must treat k as a constant (gold counts active experts on a detached tensor); here k is
# the sum of the straight-through activations, so d(1/k) adds a spurious gradient to every active expert's vector and
# threshold (forward values are unchanged).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'k_T1 = (active_TE.detach() > 0).sum(-1, keepdim=True)' \
  'k_T1 = active_TE.sum(-1, keepdim=True)'
