#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: called on plain tensors (no scale given), the op scales scores by 1/sqrt(v_head_dim), not 1/sqrt(qk_head_dim).
# Why: moba_attention(q, k, v, block_size, top_k) must use the usual softmax scale 1/sqrt(qk head size) (gold leaves
# SDPA's default, 1/sqrt(q.shape[-1])); here the default falls back to 1/sqrt(v_head_dim), wrong whenever qk_head_dim
# != v_head_dim (the model passes its own scale, so training looks normal).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  $'attn_mask=mask_BHSS, scale=scale\n' \
  $'attn_mask=mask_BHSS, scale=scale or v_BSHE.shape[-1] ** -0.5\n'
