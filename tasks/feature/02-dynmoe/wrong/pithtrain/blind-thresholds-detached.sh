#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the model passes the thresholds detached, so they never learn (they stay at 0).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'self.dynmoe_thresholds.float()' \
  'self.dynmoe_thresholds.detach().float()'
