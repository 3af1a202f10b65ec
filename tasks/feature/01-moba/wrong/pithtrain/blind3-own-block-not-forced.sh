#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the gate masks future blocks but does not force the query's own block in; it is selected only if its score is in the top k.
# Why: The paper and instruction say the query's own block is always selected (counting as one of the k); an agent that reads 'top-k over causal blocks' as plain top-k drops this rule, and nothing crashes because earlier blocks are still allowed.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))' \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf"))'
