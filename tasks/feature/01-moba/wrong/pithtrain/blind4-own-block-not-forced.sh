#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the query's own block is not forced into the selection; it competes on its gate score like any earlier block.
# Why: the paper and the instruction say the own block is always selected (counting as one of the k); an agent that only masks future blocks with -inf before top-k gets this, and it only matters once a query has more than k candidate blocks.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))' \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf"))'
