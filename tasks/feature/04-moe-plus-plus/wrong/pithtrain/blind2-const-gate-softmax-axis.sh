#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the constant experts' [a1, a2] softmax runs over the constant experts instead of over the pair.
# Why: instruction: [a1, a2] = softmax(W_c x) per constant expert (a softmax over its two entries); normalising across the constant experts gives a1 + a2 != 1 for each one.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'a_TCJ = torch.einsum("td,cjd->tcj", x_TD, const_gate_CJD).softmax(-1)' \
  'a_TCJ = torch.einsum("td,cjd->tcj", x_TD, const_gate_CJD).softmax(1)'
