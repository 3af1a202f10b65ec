#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the k_max cap keeps the experts with the largest score s_e instead of the largest margin s_e - sigmoid(g_e).
# Why: the instruction says the experts kept under the cap are those with the largest s_e - sigmoid(g_e); with per-expert thresholds the two orders differ, and the cap is rarely reached.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'kept_TK = margin_TE.detach().topk(' \
  'kept_TK = score_TE.detach().topk('
