#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: a constant expert outputs a2 v only, dropping the a1 x term.
# Why: instruction/paper: a constant expert outputs a1 x + a2 v with [a1, a2] = softmax(W_c x); without a1 x it is a gated constant vector.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  '(a_TCJ[:, c, :1] * x_TD + a_TCJ[:, c, 1:] * const_vectors_CD[c])' \
  '(a_TCJ[:, c, 1:] * const_vectors_CD[c])'
