#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the activation is a plain torch.sign, without the straight-through estimator, so no gradient reaches the expert vectors or thresholds through the gate.
# Why: the instruction asks a sign with a straight-through gradient so vectors and thresholds learn; an agent writing sign(relu(.)) literally gets zero gradients yet the model still trains (experts, shared path).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  '_SignStraightThrough.apply(margin_TE) * torch.zeros_like' \
  'torch.sign(margin_TE) * torch.zeros_like'
