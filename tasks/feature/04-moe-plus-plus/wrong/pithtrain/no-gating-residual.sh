#!/usr/bin/env bash
# Wrong solution for 04-moe-plus-plus on pithtrain, which must FAIL: the gold with one rule broken (no gating residual).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'routed_TE = logits_TE if prev_logits_TE is None else logits_TE + prev_logits_TE @ residual_weight_EE.T' \
  'routed_TE = logits_TE'
