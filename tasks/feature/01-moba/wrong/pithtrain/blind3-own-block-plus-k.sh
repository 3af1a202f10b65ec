#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: top-k keeps k blocks besides the forced own block (k + 1 in all).
# Why: The instruction says the own block counts as one of the k (k = 3 means own + 2 best); reading 'the top k blocks plus the current block' as in some descriptions gives k + 1 blocks (lower sparsity).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'chosen_BHSK = gate_BHSN.topk(min(top_k, N), dim=-1).indices' \
  'chosen_BHSK = gate_BHSN.topk(min(top_k + 1, N), dim=-1).indices'
