#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: an expert is active when s_e exceeds the raw threshold g_e, not sigmoid(g_e).
# Why: The rule is s_e > sigmoid(g_e); comparing the sigmoid score with g_e itself (an easy slip, 'threshold initialised at 0') makes every expert active at init (s_e > 0 always), so the gate is no longer top-any, yet training runs.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'margin_TE = F.relu(score_TE - torch.sigmoid(thresholds_E))' \
  'margin_TE = F.relu(score_TE - thresholds_E)'
