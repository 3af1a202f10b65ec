#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: a token with no active expert falls back to the argmax of the (all-zero) relu margin, i.e. always expert 0.
# Why: the fallback is the top-1 expert by s_e; using the margin that was just computed looks natural but it is relu-clipped to 0 exactly when the fallback fires.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'F.one_hot(score_TE.detach().argmax(-1)' \
  'F.one_hot(margin_TE.detach().argmax(-1)'
