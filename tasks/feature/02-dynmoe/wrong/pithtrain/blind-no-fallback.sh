#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: tokens with no active expert get all-zero combine weights instead of falling back to their top-1 expert with weight 1.
# Why: A token with no active expert must fall back to its top-1 expert by s_e with weight 1 (gold adds the one-hot
# fallback); here such tokens get zero routed output.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'return active_TE / k_T1.clamp(min=1) + fallback_TE' \
  'return active_TE / k_T1.clamp(min=1)'
