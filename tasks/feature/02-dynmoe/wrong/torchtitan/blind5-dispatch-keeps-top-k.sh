#!/usr/bin/env bash
# Near miss for 02-dynmoe on torchtitan, which must FAIL: the router dispatches only the flavor's top_k (2) slots per token from the gate's weights, instead of min(k_max, experts), so tokens with more active experts lose some of their 1/k weights.
# Why: tokens now use a variable number of experts up to k_max; keeping TorchTitan's fixed top-k dispatch width is the easiest way to plug the gate into the reorderer and the grouped experts, and it still trains (the seam sees active experts' weights that get no gradient).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/dynmoe.patch" \
  'self.top_k = min(dynmoe_k_max, num_experts)' \
  'self.top_k = top_k  # the flavor dispatch width'
