#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: each block is represented by the mean of its queries, not of its keys.
# Why: the paper scores a block by the query's dot product with the mean of the block's keys; pooling the wrong tensor of the same shape is an easy slip and still trains.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'sum_k_BNHD.index_add_(1, block_S, k_BSHD.float())' \
  'sum_k_BNHD.index_add_(1, block_S, q_BSHD.float())'
