#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the MoE++ routing path attaches no load-balancing loss.
# Why: instruction: keep the model's load-balancing loss as it is; the new route returns without it, so MoE layers train with no balancing term.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  '            topk_w_TK = AttachAuxLoss.apply(topk_w_TK, aux * aux_loss_scale)
        ffn_slot_TK = topk_ids_TK < F_' \
  '        ffn_slot_TK = topk_ids_TK < F_'
