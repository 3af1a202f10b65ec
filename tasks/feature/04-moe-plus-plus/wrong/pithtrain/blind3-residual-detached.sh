#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the routed logits handed to the next MoE layer are detached, so no gradient flows back through the gating residual.
# Why: prev_logits is a tensor argument the op must be differentiable in, and in MoE++ the gating residual is trained end to end; detaching it (to avoid 'leaking' graphs between layers, a common reflex) cuts the previous layer's router off from the next layer's loss.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'self.moepp_routed_TE = routed_TE' \
  'self.moepp_routed_TE = routed_TE.detach()'
