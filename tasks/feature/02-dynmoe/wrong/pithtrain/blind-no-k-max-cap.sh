#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: no cap on the number of active experts: every expert above its threshold stays active, even beyond k_max.
# Why: At most k_max experts stay active per token (those with the largest s_e - sigmoid(g_e)); gold masks all but the
# top-k_max margins; here all active experts are kept and weighted 1/k, so with more than k_max experts above
# threshold tokens use too many experts (invisible in the 8-expert smoke model).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  ' * torch.zeros_like(margin_TE).scatter_(-1, kept_TK, 1.0)' \
  ''
