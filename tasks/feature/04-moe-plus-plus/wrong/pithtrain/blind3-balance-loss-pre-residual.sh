#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the load-balancing loss is computed on softmax of this layer's raw logits, not of the routed logits (after the gating residual).
# Why: The instruction keeps the model's balance loss computed on the probabilities the layer routes by, softmax(routed logits); an agent that leaves the existing loss on the gate's output misses the residual on every MoE layer after the first.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'routed_TE.softmax(-1).view(B, S, -1), topk_ids_TK.view(B, S, -1), cfg.aux_loss_type' \
  'logits_TE.softmax(-1).view(B, S, -1), topk_ids_TK.view(B, S, -1), cfg.aux_loss_type'
