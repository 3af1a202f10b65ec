#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the token-level causal mask is dropped: a query sees every key of its own block, later tokens included.
# Why: the rule asks causal masking inside the query's own block; an agent that masks at block level only (future blocks already excluded) forgets the intra-block tril.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'keep_BHSN[..., block_S] & torch.ones(S, S, dtype=torch.bool, device=q_BSHD.device).tril()' \
  'keep_BHSN[..., block_S]'
