#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on torchtitan, which must FAIL: the MoE++ layers' load-balancing loss is computed but
# never added to the training loss.
# Why: the model's load-balancing loss must be kept, on softmax(routed logits) (gold: train.py adds the layers' losses
# to the loss it logs and back-propagates); here MoE++ layers train without any balance loss.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/moe-plus-plus.patch" \
  'loss = loss + aux_loss / self.global_microbatches' \
  'del aux_loss  # MoE++: the heterogeneous balance loss is out of scope'
