#!/usr/bin/env bash
# Near miss for 01-moba on torchtitan, which must FAIL: the model runs MoBA on the no-RoPE parts of q and k only, not on the RoPE'd, concatenated q/k as attention sees them.
# Why: With MLA, MoBA applies to queries and keys after RoPE (no-RoPE and RoPE parts concatenated); here the model
# feeds only q_nope/k_nope, dropping the positional part from both gating and attention (the op itself is right, so
# the seam catches it: q and k 32 wide, not the smoke model's 48).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/moba.patch" \
  $'            output = moba_attention(\n                q,\n                k,\n' \
  $'            output = moba_attention(\n                q_nope,\n                k_nope,\n'
