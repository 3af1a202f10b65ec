#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: model.dynmoe defaults to true.
# Why: instruction: the option must be off by default; with this default every run without --set model.dynmoe=false uses DynMoE gating.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'dynmoe: bool = False' \
  'dynmoe: bool = True'
