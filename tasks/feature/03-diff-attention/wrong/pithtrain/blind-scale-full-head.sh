#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the model scales the scores by 1/sqrt(full qk head size) instead of 1/sqrt(d), d the size of one half.
# Why: A_j is scaled by 1/sqrt(d) with d the half size (gold pre-multiplies q only by YaRN's factor, 1 here); this
# keeps MLA's 1/sqrt(Dq) of the whole head, scores too small by sqrt(2).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'yarn = self.softmax_scale / (Dn + Dr) ** -0.5' \
  'yarn = self.softmax_scale / ((Dn + Dr) // 2) ** -0.5'
