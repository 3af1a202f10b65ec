#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the auxiliary loss takes the [hidden, hidden] Gram matrix W^T W of the [experts, hidden] weights instead of the experts' [experts, experts] Gram.
# Why: The diversity loss ||W^T W - I||^2 is over the expert vectors (W has one column per expert, so W^T W is the
# [experts, experts] Gram of their dot products; gold: vectors_ED @ vectors_ED.T); the [hidden, hidden] Gram penalises
# something else (it does not push expert vectors apart).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'gram_EE = vectors_ED @ vectors_ED.T' \
  'gram_EE = vectors_ED.T @ vectors_ED'
