#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the model scales the queries so that each half's softmax uses 1/sqrt(full qk head size) rather than 1/sqrt(d).
# Why: instruction: A_j is scaled by 1/sqrt(d) where d is the size of one half; the model here carries MLA's 1/sqrt(Dn + Dr) into the halves (queries multiplied by sqrt(d)/sqrt(2d)), a flatter softmax for both maps.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'yarn = self.softmax_scale / (Dn + Dr) ** -0.5' \
  'yarn = self.softmax_scale / ((Dn + Dr) // 2) ** -0.5'
