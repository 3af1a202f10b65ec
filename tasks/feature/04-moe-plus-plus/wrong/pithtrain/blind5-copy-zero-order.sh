#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: expert F (the zero expert's slot) acts as the copy expert and expert F+1 (the copy expert's slot) outputs 0: zero and copy swapped.
# Why: the instruction orders the experts FFN, zero, copy, constant; an agent that writes the copy range as starting right after the FFN experts (listing copy before zero, as some MoE++ write-ups do) swaps the two.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  '(topk_ids_TK >= first_copy) & (topk_ids_TK < first_const)' \
  '(topk_ids_TK >= num_ffn) & (topk_ids_TK < num_ffn + num_copy)'
