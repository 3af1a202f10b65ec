#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: called on plain tensors (no scale given), the op scales scores by 1/sqrt(v_head_dim), not 1/sqrt(qk_head_dim).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  $'attn_mask=mask_BHSS, scale=scale\n' \
  $'attn_mask=mask_BHSS, scale=scale or v_BSHE.shape[-1] ** -0.5\n'
