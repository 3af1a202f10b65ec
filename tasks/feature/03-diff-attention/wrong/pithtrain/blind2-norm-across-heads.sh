#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the RMS norm is taken over all heads of a token together, not per head.
# Why: instruction/paper: each head's output is RMS-normalised (GroupNorm per head in the paper); one RMS over the concatenated heads lets loud heads rescale quiet ones.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'torch.rsqrt(o_BHSE.pow(2).mean(-1, keepdim=True) + eps)' \
  'torch.rsqrt(o_BHSE.pow(2).mean((-2, -1), keepdim=True) + eps)'
