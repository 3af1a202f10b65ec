#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: a token with no active expert falls back to the argmax of the (all-zero) margins, i.e. always expert 0, not its top-1 by s_e.
# Why: The fallback is the top-1 expert by s_e; taking the argmax of the relu margins looks equivalent but all margins are 0 exactly when the fallback fires, so every such token goes to expert 0.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'F.one_hot(score_TE.detach().argmax(-1), score_TE.shape[-1])' \
  'F.one_hot(margin_TE.detach().argmax(-1), score_TE.shape[-1])'
