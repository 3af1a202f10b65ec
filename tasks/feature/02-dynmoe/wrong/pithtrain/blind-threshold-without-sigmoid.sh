#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: an expert is active when s_e exceeds the raw threshold g_e, not sigmoid(g_e); at init (g=0) every expert is active.
# Why: Expert e is active when s_e > sigmoid(g_e) (gold: relu(s_e - sigmoid(g_e))); comparing with g_e itself makes
# every expert active at the zero init (s_e = sigmoid(cos) > 0) and gives the thresholds the wrong gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'margin_TE = F.relu(score_TE - torch.sigmoid(thresholds_E))' \
  'margin_TE = F.relu(score_TE - thresholds_E)'
