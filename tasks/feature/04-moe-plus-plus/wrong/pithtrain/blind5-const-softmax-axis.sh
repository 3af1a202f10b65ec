#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the constant experts' [a1, a2] softmax runs over the constant-expert axis instead of over the two coefficients.
# Why: [a1, a2] = softmax(W_c x) per constant expert, so the softmax is over the last (size-2) axis; with the stacked [T, C, 2] tensor an agent easily normalises dim 1 (the experts) instead, so a1 + a2 != 1.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'x_TD, const_gate_CJD).softmax(-1)' \
  'x_TD, const_gate_CJD).softmax(1)'
