#!/usr/bin/env bash
# Near miss for 02-dynmoe on torchtitan, which must FAIL: the diversity auxiliary loss is computed and kept on the routers but never added to the training loss.
# Why: instruction: train on the auxiliary loss ||W^T W - I||^2 plus the mean squared norm of the gate's expert vectors; TorchTitan 0.2.2 has no MoE aux loss in its training step, and here train.py never takes it from the routers, so it reaches neither the backward nor the logged loss (the seam sees no gradient reach the aux function's value).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/dynmoe.patch" \
  'aux_loss = pop_moe_aux_loss(model_parts[0])' \
  'aux_loss = None  # kept on the routers'
