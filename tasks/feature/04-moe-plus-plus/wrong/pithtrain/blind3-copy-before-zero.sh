#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the copy expert is taken to be the first expert after the FFN experts (index F), where the order puts the zero expert.
# Why: The order is FFN, zero, copy, constant; putting copy first (or miscounting the zero expert's offset) makes index F copy x and index F+1 output 0, so the op's output differs for tokens routed there.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'copy_w_T = (topk_w_TK * ((topk_ids_TK >= first_copy) & (topk_ids_TK < first_const))).sum(-1)' \
  'copy_w_T = (topk_w_TK * ((topk_ids_TK >= num_ffn) & (topk_ids_TK < num_ffn + num_copy))).sum(-1)'
