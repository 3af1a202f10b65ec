#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the model runs MoBA on the no-RoPE parts of q and k only, not on the RoPE'd, concatenated q/k as attention sees them.
# Why: With MLA, MoBA applies to queries and keys after RoPE (no-RoPE and RoPE parts concatenated); here the model
# feeds only q_nope/k_nope, dropping the positional part from both gating and attention.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  $'q_BHSDq.transpose(1, 2), k_BHSDq.transpose(1, 2), v_BHSDv.transpose(1, 2),\n                self.moba_block_size' \
  $'q_nope_BHSDn.transpose(1, 2), k_nope_BHSDn.transpose(1, 2), v_BHSDv.transpose(1, 2),\n                self.moba_block_size'
