#!/usr/bin/env bash
# Wrong solution for 01-moba on pithtrain, which must FAIL: the gold with one rule broken (the query's own block is not forced in).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  '.masked_fill(own_SN, float("inf"))' \
  ''
