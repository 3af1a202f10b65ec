#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the query's own block is not forced into the selection; it only competes on its gate score like earlier blocks.
# Why: the paper and the instruction say the own block is always selected; an agent reading moba_naive loosely may drop the +inf fill and rely on the causal mask, which only excludes later blocks.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))' \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf"))'
