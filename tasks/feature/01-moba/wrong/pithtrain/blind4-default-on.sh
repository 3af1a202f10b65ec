#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the config switch model.moba defaults to true.
# Why: the instruction asks for an option that is off by default; with the feature's own enable/disable flags verify.sh behaves the same, so an agent testing only those would not notice.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'moba: bool = False' \
  'moba: bool = True'
