#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the straight-through estimator uses the derivative of s_e - sigmoid(g_e), not of relu(s_e - sigmoid(g_e)), so inactive experts also get gradient.
# Why: The gradient in place of the sign must be the derivative of relu(s_e - sigmoid(g_e)) (zero for inactive
# experts; gold applies the identity-backward sign to the relu'd margin); here the estimator passes the gradient of
# the raw difference, so inactive experts' vectors and thresholds also receive gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'active_TE = _SignStraightThrough.apply(margin_TE) * torch.zeros_like(margin_TE).scatter_(-1, kept_TK, 1.0)' \
  'active_TE = (torch.sign(margin_TE.detach()) + (score_TE - torch.sigmoid(thresholds_E)) - (score_TE - torch.sigmoid(thresholds_E)).detach()) * torch.zeros_like(margin_TE).scatter_(-1, kept_TK, 1.0)'
