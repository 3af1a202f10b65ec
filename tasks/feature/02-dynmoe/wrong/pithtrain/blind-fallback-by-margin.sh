#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the no-active-expert fallback takes the argmax of the relu'd margins (all 0), so it always falls back to expert 0, not the top-1 by s_e.
# Why: A token with no active expert falls back to its top-1 expert by s_e (gold: argmax of the scores); the relu'd
# margins of such a token are all zero, so argmax of the margin always picks expert 0.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'F.one_hot(score_TE.detach().argmax(-1)' \
  'F.one_hot(margin_TE.detach().argmax(-1)'
