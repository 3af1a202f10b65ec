#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the aux loss uses W W^T (the [hidden, hidden] matrix) minus I instead of the experts' Gram W^T W minus I.
# Why: W is [hidden, experts] with the expert vectors as columns, so W^T W is the [E, E] Gram; with the vectors stored as rows [E, D] it is easy to transpose the wrong side and penalise the [D, D] matrix, which is a different loss (and cannot be near-identity when D > E).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'gram_EE = vectors_ED @ vectors_ED.T' \
  'gram_EE = vectors_ED.T @ vectors_ED'
