#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the RMS norm's mean square is taken over all heads together instead of per head.
# Why: the paper normalises each head separately (GroupNorm per head); normalising the concatenated output is the usual RMSNorm habit and runs fine.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'o_BHSE.pow(2).mean(-1, keepdim=True)' \
  'o_BHSE.pow(2).mean((-2, -1), keepdim=True)'
