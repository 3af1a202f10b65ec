#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: compares s_e with the raw threshold g_e instead of sigmoid(g_e).
# Why: instruction: expert e is active when s_e exceeds sigmoid(g_e) (0.5 at the init g = 0); against g_e itself, sigmoid(cos) > 0 always holds at init, so every expert is active for every token.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'margin_TE = F.relu(score_TE - torch.sigmoid(thresholds_E))' \
  'margin_TE = F.relu(score_TE - thresholds_E)'
