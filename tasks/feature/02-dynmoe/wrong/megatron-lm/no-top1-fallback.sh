#!/usr/bin/env bash
# Near miss for 02-dynmoe on megatron-lm, which must FAIL: the gold with one rule broken (a token with no active expert gets nothing, not its top-1 expert).
# Why: a token with no active expert falls back to its top-1 expert by s_e with weight 1; here its weights are all 0 (the op check's fallback token differs from the reference).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/dynmoe.patch" \
  'return active / num_active.clamp(min=1) + fallback' \
  'return active / num_active.clamp(min=1)'
