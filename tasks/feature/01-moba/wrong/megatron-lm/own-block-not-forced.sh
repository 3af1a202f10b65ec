#!/usr/bin/env bash
# Near miss for 01-moba on megatron-lm, which must FAIL: the gold with one rule broken (the query's own block is not forced in).
# Why: MoBA always selects the query's own block (the gold sets its gate to +inf before top-k); here it competes by
# score, so a query with more than k candidate blocks can lose its own block (the op check differs from reference.py).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/moba.patch" \
  '.masked_fill(own, float("inf"))' \
  ''
