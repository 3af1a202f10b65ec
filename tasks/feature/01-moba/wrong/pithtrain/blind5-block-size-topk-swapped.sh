#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the model passes top_k as the block size and block_size as top_k to moba_attention (positional swap).
# Why: the function is called positionally with (block_size, top_k); swapping the two ints still runs (blocks of 3, top-16 of many blocks) and trains, but it is not B = 16 / k = 3.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'self.moba_block_size, self.moba_top_k, scale=self.softmax_scale,' \
  'self.moba_top_k, self.moba_block_size, scale=self.softmax_scale,'
