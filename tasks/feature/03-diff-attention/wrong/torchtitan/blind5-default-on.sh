#!/usr/bin/env bash
# Near miss for 03-diff-attention on torchtitan, which must FAIL: the config switch model.diff_attention (JobConfig's Model field) defaults to true.
# Why: The instruction asks for an option that is off by default; verify.sh and feature.json pass it explicitly either way, so a flipped default goes unnoticed in the runs.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/diff-attention.patch" \
  $'    diff_attention: bool = False\n    """' \
  $'    diff_attention: bool = True\n    """'
