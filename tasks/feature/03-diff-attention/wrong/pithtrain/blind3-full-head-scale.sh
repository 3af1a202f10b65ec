#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the queries are pre-scaled so that the scores use 1/sqrt(full q-k head size) rather than 1/sqrt(d) of one half.
# Why: The scale is 1/sqrt(d), d the size of one half; an agent that keeps the model's softmax_scale (computed for the whole head) and folds it into q gets scores sqrt(2) too small, a plausible 'reuse the existing scale' slip.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'yarn = self.softmax_scale / (Dn + Dr) ** -0.5' \
  'yarn = self.softmax_scale / ((Dn + Dr) // 2) ** -0.5'
