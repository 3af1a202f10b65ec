#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: each block's key mean divides the key sum by block_size, not by the block's real length, so a shorter last block is under-scored.
# Why: The block is represented by the mean of its keys and the last block may be shorter; dividing by the nominal block size is a natural shortcut that is exact only when the sequence splits evenly (the smoke run does), so it is a rarely reached error.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'sum_k_BNHD / torch.bincount(block_S, minlength=N).float()[None, :, None, None]' \
  'sum_k_BNHD / block_size'
