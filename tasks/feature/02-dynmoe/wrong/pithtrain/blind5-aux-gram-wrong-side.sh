#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the auxiliary loss uses the [hidden, hidden] matrix W W^T (with W [hidden, experts]) instead of the experts' Gram W^T W.
# Why: the instruction defines W as [hidden, experts] and the loss on W^T W, the [experts, experts] Gram; with the weights stored [experts, hidden] the transpose is easy to put on the wrong side. Note: ||W W^T - I_D||^2 = ||W^T W - I_E||^2 + (hidden - experts), so the returned value is off by that constant while the gradient is unchanged.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'gram_EE = vectors_ED @ vectors_ED.T' \
  'gram_EE = vectors_ED.T @ vectors_ED'
