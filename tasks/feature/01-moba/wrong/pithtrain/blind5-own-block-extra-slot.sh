#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: selects top_k blocks besides the own block (top_k + 1 in all), so the own block does not count as one of the k.
# Why: the instruction says the own block counts as one of the k (k = 3 -> own + 2 earlier); reading 'own block always selected, plus top-k' as additive is a common misreading.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'chosen_BHSK = gate_BHSN.topk(min(top_k, N), dim=-1).indices' \
  'chosen_BHSK = gate_BHSN.topk(min(top_k + 1, N), dim=-1).indices'
