#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: block index of position i is (i + 1) // B (1-based positions), so blocks are cut one token early and an extra 1-token block appears.
# Why: blocks are the fixed spans [nB, (n+1)B) of the sequence; an off-by-one from 1-based positions shifts every boundary, so block means and the own-block/causal rule use the wrong tokens.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  $'N = -(-S // block_size)\n    block_S = torch.arange(S, device=q_BSHD.device) // block_size' \
  $'N = S // block_size + 1\n    block_S = (torch.arange(S, device=q_BSHD.device) + 1) // block_size'
