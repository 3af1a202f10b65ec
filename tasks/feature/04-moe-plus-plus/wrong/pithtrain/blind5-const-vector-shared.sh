#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: every constant expert uses the first constant expert's learned vector v (const_vectors[0]).
# Why: the instruction gives one W_c and one v per constant expert; reading the paper's "a learned vector v" as one shared vector, an agent indexes v[0]; the second expert's v never gets a gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'a_TCJ[:, c, 1:] * const_vectors_CD[c]' \
  'a_TCJ[:, c, 1:] * const_vectors_CD[0]'
