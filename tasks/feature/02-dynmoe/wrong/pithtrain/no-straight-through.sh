#!/usr/bin/env bash
# Wrong solution for 02-dynmoe on pithtrain, which must FAIL: the gold with one rule broken (the sign has no straight-through gradient).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  '_SignStraightThrough.apply(margin_TE)' \
  'torch.sign(margin_TE).detach()'
