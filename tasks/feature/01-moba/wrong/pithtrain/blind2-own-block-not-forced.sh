#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the own block is not forced into the selection; it competes with earlier blocks on its gate score.
# Why: instruction: the query's own block is always selected (counting as one of the k); here it is just a candidate, so a query whose own-block mean-key score is low drops its own block (and its causal neighbourhood) for earlier blocks.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))' \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf"))'
