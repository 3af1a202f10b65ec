#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: an expert is active when sigmoid(cos) exceeds the raw threshold g_e, not sigmoid(g_e).
# Why: the rule compares s_e with sigmoid(g_e); comparing with g_e itself is a natural slip, and at g = 0 it makes every expert active (s_e > 0 always), a top-all gate capped at k_max.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'margin_TE = F.relu(score_TE - torch.sigmoid(thresholds_E))' \
  'margin_TE = F.relu(score_TE - thresholds_E)'
