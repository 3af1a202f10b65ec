#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the gate scores with sigmoid(x . w_e) (the token is not normalised), not sigmoid(cos(x, w_e)).
# Why: DynMoE scores by cosine similarity; normalising only the expert vectors (like a plain linear router with normalised weights) keeps the token's norm in the score, changing which experts pass their thresholds.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'score_TE = torch.sigmoid(F.normalize(x_TD, dim=-1) @ F.normalize(expert_vectors_ED, dim=-1).T)' \
  'score_TE = torch.sigmoid(x_TD @ F.normalize(expert_vectors_ED, dim=-1).T)'
