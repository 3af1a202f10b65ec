#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the constant experts' [a1, a2] softmax is taken across the constant experts instead of over the pair (a1, a2).
# Why: For each constant expert [a1, a2] = softmax(W_c x), a softmax over its two entries (gold: softmax(-1) over j);
# softmax over dim 1 normalises across constant experts, so a1 + a2 != 1.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'einsum("td,cjd->tcj", x_TD, const_gate_CJD).softmax(-1)' \
  'einsum("td,cjd->tcj", x_TD, const_gate_CJD).softmax(1)'
