#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the weights divide by the sum of the straight-through activations, so k = sum(a_e) carries gradient (the forward is unchanged).
# Why: The instruction says k carries no gradient; normalising by the (differentiable) sum of activations is the natural 'divide by k' and gives the same values, but the backward through the gate differs.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'return active_TE / k_T1.clamp(min=1) + fallback_TE' \
  'return active_TE / active_TE.sum(-1, keepdim=True).clamp(min=1) + fallback_TE'
