#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the gate scores s_e = sigmoid(x . w_e) with a plain dot product instead of the cosine similarity.
# Why: s_e = sigmoid(cos(x, w_e)): gold L2-normalises x and each w_e before the product; an unnormalised dot product
# depends on the norms of the token and the expert vector.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'score_TE = torch.sigmoid(F.normalize(x_TD, dim=-1) @ F.normalize(expert_vectors_ED, dim=-1).T)' \
  'score_TE = torch.sigmoid(x_TD @ expert_vectors_ED.T)'
