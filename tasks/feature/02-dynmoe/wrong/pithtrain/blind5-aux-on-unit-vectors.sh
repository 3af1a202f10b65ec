#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the auxiliary loss builds the Gram matrix from the L2-normalised expert vectors (a cosine Gram), so it only pushes the vectors apart and no longer measures their size.
# Why: the instruction's loss is ||W^T W - I||^2 on the raw vectors plus their mean squared norm; since the gate scores with cosine similarity, normalising the vectors here too looks consistent, yet it changes the loss and its gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'gram_EE = vectors_ED @ vectors_ED.T' \
  'gram_EE = F.normalize(vectors_ED, dim=-1) @ F.normalize(vectors_ED, dim=-1).T'
