#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the model's reset_parameters draws the thresholds from N(0, 0.02^2) like any matrix instead of starting them at 0.
# Why: the instruction says thresholds are initialised at 0; an agent that creates them with torch.zeros does not notice that the model's init loop overwrites every parameter.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  $'            elif name.endswith("dynmoe_thresholds"):  # DynMoE: thresholds start at 0\n                p.zero_()\n' \
  ''
