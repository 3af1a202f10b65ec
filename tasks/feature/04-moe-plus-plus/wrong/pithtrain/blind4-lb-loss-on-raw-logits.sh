#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the load-balancing loss uses softmax of the raw router logits instead of the routed logits (after the gating residual).
# Why: the instruction says the loss is computed on the probabilities the layer routes by, softmax(routed logits); logits_TE is the variable the old path used.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'routed_TE.softmax(-1).view(B, S, -1), topk_ids_TK.view(B, S, -1)' \
  'logits_TE.softmax(-1).view(B, S, -1), topk_ids_TK.view(B, S, -1)'
