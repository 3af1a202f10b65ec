#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the sequence is cut into N = ceil(S/B) near-equal chunks (position * N // S) instead of fixed blocks of B tokens with a shorter last block.
# Why: the instruction fixes blocks of B tokens, the last one possibly shorter; splitting evenly (torch.chunk style) is identical whenever B divides S (as in verify.sh) and moves every block boundary otherwise.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'block_S = torch.arange(S, device=q_BSHD.device) // block_size' \
  'block_S = torch.arange(S, device=q_BSHD.device) * N // S'
