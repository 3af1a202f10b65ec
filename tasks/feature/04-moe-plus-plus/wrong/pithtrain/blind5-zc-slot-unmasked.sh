#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: slots on zero-computation experts are sent to FFN expert 0 with their full weight instead of weight 0.
# Why: the instruction: weight each chosen FFN expert (id below the FFN count) by its weight; the other ids' share is already in y. Remapping the ids but forgetting to zero their weights adds FFN expert 0's output for every zero/copy/constant choice.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'return torch.where(ffn_slot_TK, topk_ids_TK, 0), topk_w_TK * ffn_slot_TK' \
  'return torch.where(ffn_slot_TK, topk_ids_TK, 0), topk_w_TK'
