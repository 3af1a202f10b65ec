#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the constant experts' [a1, a2] softmax runs over the constant-expert axis instead of the (a1, a2) pair.
# Why: [a1, a2] = softmax(W_c x) per constant expert; with 2 constant experts and 2 coefficients both axes have size 2, so softmax(1) runs silently.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'a_TCJ = torch.einsum("td,cjd->tcj", x_TD, const_gate_CJD).softmax(-1)' \
  'a_TCJ = torch.einsum("td,cjd->tcj", x_TD, const_gate_CJD).softmax(1)'
