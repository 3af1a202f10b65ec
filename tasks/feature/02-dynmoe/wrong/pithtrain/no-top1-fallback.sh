#!/usr/bin/env bash
# Wrong solution for 02-dynmoe on pithtrain, which must FAIL: the gold with one rule broken (a token with no active expert gets nothing, not its top-1 expert).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'return active_TE / k_T1.clamp(min=1) + fallback_TE' \
  'return active_TE / k_T1.clamp(min=1)'
