#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: a token with no active expert gets no expert at all (all weights zero).
# Why: instruction: a token with no active expert falls back to its top-1 expert by s_e, with weight 1; here such tokens are dropped from the routed experts.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'return active_TE / k_T1.clamp(min=1) + fallback_TE' \
  'return active_TE / k_T1.clamp(min=1)'
