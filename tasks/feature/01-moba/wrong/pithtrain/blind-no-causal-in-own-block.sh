#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: no causal mask inside the query's own block: a query attends to later tokens of its block.
# Why: Attention inside the query's own block must be causal (gold ANDs the block mask with a lower-triangular mask);
# here the whole own block is visible, so queries see future tokens of their block.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  $'    mask_BHSS = keep_BHSN[..., block_S] & torch.ones(S, S, dtype=torch.bool, device=q_BSHD.device).tril()\n' \
  $'    mask_BHSS = keep_BHSN[..., block_S]  # future blocks are already excluded by keep\n'
