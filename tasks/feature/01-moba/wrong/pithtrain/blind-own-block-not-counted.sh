#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the own block is not counted as one of the k: each query keeps k earlier blocks plus its own (k+1 blocks).
# Why: The own block counts as one of the top_k blocks (gold: topk(min(top_k, N))); here top_k + 1 blocks are kept, so
# a query attends to one block too many (k=3 gives 4 of 8 blocks).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'chosen_BHSK = gate_BHSN.topk(min(top_k, N), dim=-1).indices' \
  'chosen_BHSK = gate_BHSN.topk(min(top_k + 1, N), dim=-1).indices  # own block + top_k earlier blocks'
