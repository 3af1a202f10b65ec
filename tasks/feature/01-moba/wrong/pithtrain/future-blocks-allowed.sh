#!/usr/bin/env bash
# Wrong solution for 01-moba on pithtrain, which must FAIL: the gold with one rule broken (blocks after the query's own may win a top-k place).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN' \
  'gate_BHSN = gate_BHSN.masked_fill(own_SN'
