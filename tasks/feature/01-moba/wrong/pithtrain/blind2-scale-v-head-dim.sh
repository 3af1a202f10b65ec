#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: softmax scale 1/sqrt(v_head_dim) instead of 1/sqrt(query-key head size).
# Why: instruction: the usual softmax scale of 1/sqrt(query-key head size) (MLA: nope + rope = 48 in smoke); this uses the value head size (32), both in the model and for direct calls, so MoBA with k >= blocks no longer equals dense causal attention.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'attn_mask=mask_BHSS, scale=scale' \
  'attn_mask=mask_BHSS, scale=v_BSHE.shape[-1] ** -0.5'
