#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the block gate is summed over heads, so every head of a token selects the same blocks.
# Why: MoBA gates per query, i.e. per head (q of one head against that head's mean key); an agent that wants one selection per token for efficiency sums the head scores, which changes which blocks each head sees.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD)' \
  'gate_BHSN = torch.einsum("bshd,bnhd->bsn", q_BSHD.float(), mean_k_BNHD)[:, None].expand(B, H, S, N)'
