#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the selected blocks become a token mask without the causal tril, so a query sees the later tokens of its own block.
# Why: MoBA masks causally inside the query's own block; block-level causality (future blocks excluded) looks sufficient to an agent but leaks up to B-1 future tokens and breaks the dense-causal identity at k >= blocks.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'mask_BHSS = keep_BHSN[..., block_S] & torch.ones(S, S, dtype=torch.bool, device=q_BSHD.device).tril()' \
  'mask_BHSS = keep_BHSN[..., block_S]'
