#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the copy expert is taken to be index F (right after the FFN experts) and the zero expert F+1, i.e. zero and copy swapped.
# Why: the instruction orders the experts FFN, zero, copy, constant; putting copy first is an easy off-by-one in the index ranges.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  $'    first_copy, first_const = num_ffn + num_zero, num_ffn + num_zero + num_copy\n    copy_w_T = (topk_w_TK * ((topk_ids_TK >= first_copy) & (topk_ids_TK < first_const))).sum(-1)' \
  $'    first_copy, first_const = num_ffn, num_ffn + num_zero + num_copy\n    copy_w_T = (topk_w_TK * ((topk_ids_TK >= first_copy) & (topk_ids_TK < first_copy + num_copy))).sum(-1)'
