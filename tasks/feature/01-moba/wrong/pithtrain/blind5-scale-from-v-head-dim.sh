#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the softmax scale is 1/sqrt(v_head_dim) (the value head size) and ignores the scale argument the model passes.
# Why: the instruction fixes the scale at 1/sqrt(query-key head size); with MLA the q/k head (nope + rope) is wider than the value head, an easy dimension to confuse.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'attn_mask=mask_BHSS, scale=scale' \
  'attn_mask=mask_BHSS, scale=v_BSHE.shape[-1] ** -0.5'
