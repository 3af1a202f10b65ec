#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the copy experts are taken to come right after the FFN experts, before the zero experts (order FFN, copy, zero, constant).
# Why: Experts are ordered FFN, zero, copy, constant (gold's copy range starts at num_ffn + num_zero); here the copy
# range starts at num_ffn, so the zero expert's index acts as the copy expert and the copy expert's outputs 0.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'copy_w_T = (topk_w_TK * ((topk_ids_TK >= first_copy) & (topk_ids_TK < first_const))).sum(-1)' \
  'copy_w_T = (topk_w_TK * ((topk_ids_TK >= num_ffn) & (topk_ids_TK < num_ffn + num_copy))).sum(-1)'
