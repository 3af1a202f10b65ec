#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: no cap on the number of active experts: every expert above its threshold stays active, even beyond k_max.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  ' * torch.zeros_like(margin_TE).scatter_(-1, kept_TK, 1.0)' \
  ''
