#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the k_max cap keeps the experts with the largest score s_e, not the largest margin s_e - sigmoid(g_e).
# Why: The cap must keep those with the largest s_e - sigmoid(g_e); ranking by s_e is the same only while all thresholds are equal (at init), so the mistake appears once thresholds learn and k_max binds: a rarely reached branch.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'kept_TK = margin_TE.detach().topk(' \
  'kept_TK = score_TE.detach().topk('
