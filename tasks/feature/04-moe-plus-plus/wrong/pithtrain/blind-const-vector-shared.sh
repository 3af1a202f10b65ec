#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: both constant experts use the first learned vector v, instead of one v per constant expert.
# Why: Each constant expert has its own learned vector v (gold uses const_vectors[c]); here every constant expert adds
# v_0 and the second vector gets no gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'const_vectors_CD[c]' \
  'const_vectors_CD[0]'
