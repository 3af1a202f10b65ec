#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the learnable thresholds are passed to dynmoe_gate detached, so they never train.
# Why: the thresholds g_e must learn through the straight-through sign; a .detach() (e.g. copied from the detached top-k line) freezes them at 0 while the loss still falls.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'self.dynmoe_thresholds.float(), cfg.dynmoe_k_max' \
  'self.dynmoe_thresholds.detach().float(), cfg.dynmoe_k_max'
