#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the auxiliary loss takes the [hidden, hidden] Gram matrix W^T W of the [experts, hidden] weights instead of the experts' [experts, experts] Gram.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'gram_EE = vectors_ED @ vectors_ED.T' \
  'gram_EE = vectors_ED.T @ vectors_ED'
