#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the selected-block mask is used without the token-level causal mask, so queries see later tokens of their own block.
# Why: instruction: attention runs with causal masking inside the query's own block; the block mask alone lets each query attend to the future tokens of its own block (a leak that makes the loss fall faster).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'mask_BHSS = keep_BHSN[..., block_S] & torch.ones(S, S, dtype=torch.bool, device=q_BSHD.device).tril()' \
  'mask_BHSS = keep_BHSN[..., block_S]'
