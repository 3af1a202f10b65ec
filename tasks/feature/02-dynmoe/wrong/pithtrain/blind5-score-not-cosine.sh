#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the token is not normalised before the dot product with the normalised expert vectors, so s_e = sigmoid(x . w_e/|w_e|), not sigmoid(cos(x, w_e)).
# Why: the score is the cosine similarity of token and expert vector; normalising only the learnable vectors (as some routers do) is a plausible shortcut.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'score_TE = torch.sigmoid(F.normalize(x_TD, dim=-1) @ F.normalize(' \
  'score_TE = torch.sigmoid(x_TD @ F.normalize('
