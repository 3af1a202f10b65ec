#!/usr/bin/env bash
# Near miss for 01-moba on megatron-lm, which must FAIL: the gold with one rule broken (blocks after the query's own may win a top-k place).
# Why: Blocks after the query's own must be set to -inf before top-k; here they compete, and the slots they win are
# then masked out (& ~future), so later queries see fewer than k blocks (the op check differs from reference.py).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/moba.patch" \
  'gate = gate.masked_fill(future, float("-inf")).masked_fill(own' \
  'gate = gate.masked_fill(own'
