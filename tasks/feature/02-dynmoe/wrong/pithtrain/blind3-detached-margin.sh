#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the sign's input is detached, so no gradient reaches the expert vectors or the thresholds through the gate.
# Why: The straight-through estimator must carry the gradient of relu(s_e - sigmoid(g_e)) to w_e and g_e; detaching the sign's argument (treating the hard 0/1 as a constant) leaves the thresholds untrained and the gate vectors trained by the aux loss only.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'active_TE = _SignStraightThrough.apply(margin_TE) *' \
  'active_TE = _SignStraightThrough.apply(margin_TE.detach()) *'
