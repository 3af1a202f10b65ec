#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: tokens with no active expert get all-zero combine weights instead of falling back to their top-1 expert with weight 1.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'return active_TE / k_T1.clamp(min=1) + fallback_TE' \
  'return active_TE / k_T1.clamp(min=1)'
