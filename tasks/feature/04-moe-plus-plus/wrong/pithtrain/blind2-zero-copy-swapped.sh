#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the copy expert sits at the zero expert's index (FFN, copy, zero, constant).
# Why: instruction: order the experts as the FFN experts, then the zero, the copy and the constant experts; here index num_ffn copies x and index num_ffn + 1 outputs 0.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'copy_w_T = (topk_w_TK * ((topk_ids_TK >= first_copy) & (topk_ids_TK < first_const))).sum(-1)' \
  'copy_w_T = (topk_w_TK * ((topk_ids_TK >= num_ffn) & (topk_ids_TK < num_ffn + num_copy))).sum(-1)'
