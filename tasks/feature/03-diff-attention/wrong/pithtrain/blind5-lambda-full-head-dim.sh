#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the four lambda vectors have size Dq (the whole query/key head, 48) instead of d = Dq/2 (24), so <lambda_q, lambda_k> sums twice as many terms.
# Why: The instruction says the lambda vectors are of size d, the size of one half; sizing them by the layer's head dim is a natural slip and, as only their dot products are used, nothing breaks.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'nn.Parameter(torch.empty(Dh)) for _ in range(4)' \
  'nn.Parameter(torch.empty(Dq)) for _ in range(4)'
