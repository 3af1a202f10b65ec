#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: a token with no active expert falls back to the argmax of the margin, which is all zeros after the relu, so it always falls back to expert 0.
# Why: the fallback is the top-1 expert by s_e; taking the argmax of the already computed margin looks equivalent but ties at 0 for exactly the tokens that need the fallback.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'F.one_hot(score_TE.detach().argmax(-1)' \
  'F.one_hot(margin_TE.detach().argmax(-1)'
