#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the model passes the thresholds detached, so they never learn (they stay at 0).
# Why: The thresholds g_e are learnable and must get gradient through the straight-through gate (gold passes the
# parameter itself); detaching it in the model leaves every threshold at its initial 0, a constant where a learned
# value is required.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'self.dynmoe_thresholds.float()' \
  'self.dynmoe_thresholds.detach().float()'
