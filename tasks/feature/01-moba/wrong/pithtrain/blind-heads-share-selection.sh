#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: block selection is shared by all heads (gate scores averaged over heads) instead of each query head choosing its own.
# Why: A query's gate score is its own (per-head) dot product with each block's mean key, so each head selects its own
# top-k blocks; here scores are averaged over heads and every head attends to the same blocks.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD)' \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD).mean(1, keepdim=True)'
