#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the aux loss uses the [hidden, hidden] matrix W W^T - I instead of the [experts, experts] Gram W^T W - I.
# Why: with the vectors stored as rows [experts, hidden], W^T W is vectors @ vectors.T; transposing the wrong side is the classic slip, and the loss still falls.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'gram_EE = vectors_ED @ vectors_ED.T' \
  'gram_EE = vectors_ED.T @ vectors_ED'
