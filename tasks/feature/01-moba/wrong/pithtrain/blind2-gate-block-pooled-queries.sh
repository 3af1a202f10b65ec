#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the gate scores a block with the mean query of the query's block, so all queries of a block share one selection.
# Why: instruction/paper: a query's gate score for a block is the dot product of the query itself with the block's mean key; pooling the queries per block (as in other block-sparse methods) replaces the per-query top-k with a per-block one.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD)' \
  'mean_q_BSHD = (torch.zeros_like(sum_k_BNHD).index_add_(1, block_S, q_BSHD.float()) / torch.bincount(block_S, minlength=N).float()[None, :, None, None])[:, block_S]
    gate_BHSN = torch.einsum("bshd,bnhd->bhsn", mean_q_BSHD, mean_k_BNHD)'
