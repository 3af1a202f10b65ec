#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: q is pre-multiplied so that the scores end up scaled by the model's 1/sqrt(Dq) (full head), not 1/sqrt(d) of one half.
# Why: A_j must use 1/sqrt(d) with d the half size, and q must reach the function unscaled but for YaRN's temperature; computing the YaRN ratio against the half size keeps the baseline's 1/sqrt(Dq) scores.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'yarn = self.softmax_scale / (Dn + Dr) ** -0.5' \
  'yarn = self.softmax_scale / ((Dn + Dr) // 2) ** -0.5'
