#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the gate scores are averaged over heads, so all heads of a token select the same blocks.
# Why: A query's gate score is its own dot product with the block's mean key, per head (MoBA gates each head independently, moba_naive.py); pooling the scores over heads to pick one block set per token is a plausible simplification that still trains.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD)' \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD).mean(1, keepdim=True).expand(B, H, S, N)'
