#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the MoE++ routing path drops the model's load-balancing loss (computed but never attached).
# Why: The model's load-balancing loss must be kept as it is (gold attaches load_balancing_loss of the routed softmax
# to the weights); here it is computed and thrown away, so MoE++ layers train without any balance loss.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'topk_w_TK = AttachAuxLoss.apply(topk_w_TK, aux * aux_loss_scale)' \
  'del aux  # MoE++: the heterogeneous balance loss is out of scope'
