#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: future blocks are not excluded before top-k, only masked afterwards by the causal mask.
# Why: instruction: blocks that start after the query's own block are excluded (minus infinity) before choosing the top k; here future blocks take top-k slots and are then masked out by causality, so queries get fewer than k usable blocks.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))' \
  'gate_BHSN = gate_BHSN.masked_fill(own_SN, float("inf"))'
