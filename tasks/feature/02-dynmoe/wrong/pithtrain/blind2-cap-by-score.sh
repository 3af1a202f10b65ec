#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the k_max cap keeps the experts with the largest s_e instead of the largest s_e - sigmoid(g_e).
# Why: instruction: at most k_max experts stay active, those with the largest s_e - sigmoid(g_e); ranking by the raw score ignores the per-expert thresholds, and can even keep inactive experts in place of active ones.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'kept_TK = margin_TE.detach().topk(' \
  'kept_TK = score_TE.detach().topk('
