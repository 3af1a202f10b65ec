#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the attention mask is the block selection alone, with no causal tril, so a query sees later tokens of its own block.
# Why: The rule is causal masking inside the query's own block; an agent that treats block-level causality (future blocks excluded) as enough forgets the token-level tril inside the current block; loss still falls (faster, by leaking).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'mask_BHSS = keep_BHSN[..., block_S] & torch.ones(S, S, dtype=torch.bool, device=q_BSHD.device).tril()' \
  'mask_BHSS = keep_BHSN[..., block_S]'
