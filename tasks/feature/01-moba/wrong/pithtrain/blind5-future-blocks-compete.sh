#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: later blocks are not set to -inf before the top-k, so they can take top-k slots (the token-level causal mask then drops them), leaving fewer than k usable blocks.
# Why: the rule excludes blocks after the query's block from the candidates; an agent may trust the final causal tril to hide them and skip the gate-level exclusion.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))' \
  'gate_BHSN = gate_BHSN.masked_fill(own_SN, float("inf"))'
