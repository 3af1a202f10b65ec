#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the gate scores are summed over heads, so every head of a query selects the same blocks.
# Why: MoBA gates per head (a query's dot product with the block's mean key, both per head); pooling the gate over heads is a tempting simplification that still trains.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD)' \
  'gate_BHSN = torch.einsum("bshd,bnhd->bsn", q_BSHD.float(), mean_k_BNHD)[:, None].expand(B, H, S, N)'
