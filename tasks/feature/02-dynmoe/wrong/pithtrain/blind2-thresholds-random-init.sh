#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the thresholds are left to the model's generic normal init instead of 0.
# Why: instruction: one learnable threshold per expert, initialised at 0; the generic init draws them from N(0, initializer_range^2).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  '            elif name.endswith("dynmoe_thresholds"):  # DynMoE: thresholds start at 0
                p.zero_()
' \
  ''
