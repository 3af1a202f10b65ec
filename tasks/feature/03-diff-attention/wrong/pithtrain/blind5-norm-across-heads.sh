#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the RMS norm's mean square is taken over all heads and channels of a token together, not per head.
# Why: The paper normalises each head separately (GroupNorm with one group per head); normalising the concatenated H*Dv vector is the usual RMSNorm habit and looks alike.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'o_BHSE.pow(2).mean(-1, keepdim=True)' \
  'o_BHSE.pow(2).mean((-2, -1), keepdim=True)'
