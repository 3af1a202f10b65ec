#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: k is the sum of the straight-through activations, so the 1/k weights pass gradient through k.
# Why: instruction: the active experts share equal weights 1/k, where k is the number of active experts and k carries no gradient; forward values are unchanged but the gate and thresholds get an extra gradient through 1/k.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'k_T1 = (active_TE.detach() > 0).sum(-1, keepdim=True)' \
  'k_T1 = active_TE.sum(-1, keepdim=True)'
