#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the constant experts' [a1, a2] softmax is taken over the constant experts instead of over the pair (a1, a2).
# Why: [a1, a2] = softmax(W_c x) per constant expert; with W_c stacked as [constant, 2, hidden] the einsum gives [tokens, constant, 2] and a softmax on dim -2 instead of -1 is an easy wrong-axis slip that keeps every shape.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'a_TCJ = torch.einsum("td,cjd->tcj", x_TD, const_gate_CJD).softmax(-1)' \
  'a_TCJ = torch.einsum("td,cjd->tcj", x_TD, const_gate_CJD).softmax(-2)'
