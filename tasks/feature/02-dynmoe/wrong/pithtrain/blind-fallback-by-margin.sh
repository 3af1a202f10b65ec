#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the no-active-expert fallback takes the argmax of the relu'd margins (all 0), so it always falls back to expert 0, not the top-1 by s_e.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'F.one_hot(score_TE.detach().argmax(-1)' \
  'F.one_hot(margin_TE.detach().argmax(-1)'
