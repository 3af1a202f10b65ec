#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the query's own block is not forced into the selection; it only competes on its gate score.
# Why: MoBA must always select the query's own block (gold sets its gate to +inf before top-k); here the own block
# competes by score, so a query can lose its own block (and the causal diagonal) when earlier blocks score higher.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  '.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))' \
  '.masked_fill(future_SN, float("-inf"))'
