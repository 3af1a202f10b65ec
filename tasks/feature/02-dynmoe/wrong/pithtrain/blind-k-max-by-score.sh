#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the k_max cap keeps the experts with the largest score s_e instead of the largest margin s_e - sigmoid(g_e).
# Why: When more than k_max experts are active, the kept ones are those with the largest s_e - sigmoid(g_e) (gold:
# top-k of the margin); ranking by s_e alone ignores the per-expert thresholds and can keep an expert with a higher
# score but a smaller margin (or even an inactive one).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'kept_TK = margin_TE.detach().topk(' \
  'kept_TK = score_TE.detach().topk('
