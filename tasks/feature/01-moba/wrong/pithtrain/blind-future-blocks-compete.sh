#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: future blocks are not excluded before top-k, so they take top-k slots and are then masked out (fewer than k blocks).
# Why: Blocks after the query's own must be set to -inf before top-k so the k slots go to the own block and the best
# earlier blocks; here future blocks win slots that the causal mask then empties, so queries see fewer than k blocks.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))' \
  'gate_BHSN = gate_BHSN.masked_fill(own_SN, float("inf"))'
