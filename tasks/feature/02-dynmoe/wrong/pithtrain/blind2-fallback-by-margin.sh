#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the fallback expert is the argmax of the relu'd margin, which is all zeros for a fallback token, so it is always expert 0.
# Why: instruction: the fallback is the token's top-1 expert by s_e; when no expert is active every relu(s_e - sigmoid(g_e)) is 0 and argmax returns index 0, so all fallback tokens go to expert 0.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'F.one_hot(score_TE.detach().argmax(-1)' \
  'F.one_hot(margin_TE.detach().argmax(-1)'
