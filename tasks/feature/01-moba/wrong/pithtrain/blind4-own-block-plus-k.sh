#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: selects the own block plus top_k further blocks (top_k + 1 in all).
# Why: the instruction says the own block counts as one of the k; reading 'top-k of the earlier blocks, plus the own block' is a common misreading (3 blocks become 4, sparsity drops).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'chosen_BHSK = gate_BHSN.topk(min(top_k, N), dim=-1).indices' \
  'chosen_BHSK = gate_BHSN.topk(min(top_k + 1, N), dim=-1).indices'
