#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the k_max cap keeps the experts with the largest score s_e instead of the largest margin s_e - sigmoid(g_e).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'kept_TK = margin_TE.detach().topk(' \
  'kept_TK = score_TE.detach().topk('
