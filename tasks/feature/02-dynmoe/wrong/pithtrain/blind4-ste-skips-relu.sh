#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the straight-through gradient is the identity of s_e - sigmoid(g_e) (relu's derivative dropped), so inactive experts also get gradient.
# Why: the instruction says the derivative of relu(s_e - sigmoid(g_e)) stands in for the sign's; the common STE idiom x + (sign(x) - x).detach() on the pre-relu difference gives the same forward and a different gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  '_SignStraightThrough.apply(margin_TE)' \
  '(torch.sign(margin_TE).detach() + (score_TE - torch.sigmoid(thresholds_E)) - (score_TE - torch.sigmoid(thresholds_E)).detach())'
