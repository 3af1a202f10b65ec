#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on torchtitan, which must FAIL: model.moepp defaults to true.
# Why: instruction: the option must be off by default; with this default every run without --model.no-moepp uses
# MoE++ (and 4 fewer FFN experts).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/moe-plus-plus.patch" \
  $'moepp: bool = False\n    """' \
  $'moepp: bool = True\n    """'
