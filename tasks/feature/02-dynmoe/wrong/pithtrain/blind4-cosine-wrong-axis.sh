#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the expert vectors are L2-normalised along the expert axis (dim 0) instead of per vector, so the score is not a cosine.
# Why: s_e = sigmoid(cos(x, w_e)) needs each w_e normalised over hidden; a wrong dim on a [experts, hidden] matrix runs silently.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'F.normalize(expert_vectors_ED, dim=-1)' \
  'F.normalize(expert_vectors_ED, dim=0)'
