#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: future blocks are not set to -inf before top-k (only forced own block), they are dropped after selection, so they use up top-k slots.
# Why: Blocks after the query's own must be excluded from the candidates before top-k; masking them only afterwards (the causal tril hides their tokens, so it trains fine) leaves queries with fewer than k past blocks.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))' \
  'gate_BHSN = gate_BHSN.masked_fill(own_SN, float("inf"))'
