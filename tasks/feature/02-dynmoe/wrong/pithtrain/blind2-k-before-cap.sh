#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: k counts every active expert before the k_max cap, so capped tokens get weights 1/k that sum below 1.
# Why: instruction: the active experts (at most k_max of them) share equal combine weights 1/k; counting k before the cap gives the kept experts 1/(uncapped count).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'k_T1 = (active_TE.detach() > 0).sum(-1, keepdim=True)' \
  'k_T1 = (margin_TE.detach() > 0).sum(-1, keepdim=True)'
