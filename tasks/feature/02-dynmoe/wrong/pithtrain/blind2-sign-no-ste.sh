#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: activations use plain torch.sign, with no straight-through gradient.
# Why: instruction: the gradient passes straight through the sign (the derivative of relu(s_e - sigmoid(g_e)) in its place) so that the vectors and thresholds learn; torch.sign has zero gradient, so the routing loss never reaches the expert vectors or the thresholds (only the auxiliary loss moves the vectors).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'active_TE = _SignStraightThrough.apply(margin_TE) * torch.zeros_like' \
  'active_TE = torch.sign(margin_TE) * torch.zeros_like'
