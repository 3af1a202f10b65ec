#!/usr/bin/env bash
# Near miss for 01-moba on torchtitan, which must FAIL: the job-config switch model.moba defaults to true.
# Why: the instruction asks for an option that is off by default; with the feature's own enable/disable flags verify.sh
# behaves the same, and on smoke the default block of 256 makes MoBA dense causal attention over 128 tokens, so only
# the base runs' calls of the op show it (revision 5).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/moba.patch" \
  $'    moba: bool = False\n    """\n    Mixture of block' \
  $'    moba: bool = True\n    """\n    Mixture of block'
