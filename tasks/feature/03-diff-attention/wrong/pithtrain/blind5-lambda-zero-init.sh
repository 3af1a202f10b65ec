#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the four lambda vectors are initialised to zero instead of N(0, 0.1^2); with q = k = 0 their gradients are zero, so they never move.
# Why: The paper initialises them from N(0, 0.1^2); zero init is a common 'start at lambda_init' shortcut that still trains the rest of the model.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'p.normal_(0.0, 0.1, generator=g)' \
  'p.zero_()'
