#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the queries are pre-scaled so that the softmax scale is 1/sqrt(full qk head size) instead of 1/sqrt(d) of one half.
# Why: the instruction scales by 1/sqrt(d), d the size of one half; an agent keeping the model's existing softmax scale (1/sqrt(Dq)) softens both attention maps.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'yarn = self.softmax_scale / (Dn + Dr) ** -0.5' \
  'yarn = self.softmax_scale / ((Dn + Dr) // 2) ** -0.5'
