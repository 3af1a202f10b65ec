#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the k_max cap keeps the experts with the largest score s_e instead of the largest margin s_e - sigmoid(g_e), so it can keep inactive experts and drop active ones.
# Why: the instruction says the k_max kept are those with the largest s_e - sigmoid(g_e); ranking by raw score is the familiar top-k habit and is identical while all thresholds are equal (at init, or k_max >= experts as in verify).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'kept_TK = margin_TE.detach().topk(' \
  'kept_TK = score_TE.detach().topk('
