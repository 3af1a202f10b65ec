#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the gating residual uses the previous layer's routed logits detached, so no gradient reaches the previous layer (or prev_logits).
# Why: The op must be differentiable in prev_logits and the residual must carry gradient back into the previous MoE
# layer's router (gold uses prev_logits as is); detaching cuts that path.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'prev_logits_TE @ residual_weight_EE.T' \
  'prev_logits_TE.detach() @ residual_weight_EE.T'
