#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: Q1/K1 are the first half of the concatenated [no-RoPE, RoPE] head and Q2/K2 the second, instead of halving each part.
# Why: the instruction says for MLA to split the no-RoPE part and the RoPE part each in half; cutting the concatenated head in the middle puts all RoPE dims in Q2 and none in Q1.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  $'            q1 = torch.cat((q_nope_BHSDn[..., :hn], q_pe_BHSDr[..., :hr]), -1)\n            q2 = torch.cat((q_nope_BHSDn[..., hn:], q_pe_BHSDr[..., hr:]), -1)\n            k1 = torch.cat((k_BHSDq[..., :hn], k_BHSDq[..., Dn : Dn + hr]), -1)\n            k2 = torch.cat((k_BHSDq[..., hn:Dn], k_BHSDq[..., Dn + hr :]), -1)' \
  $'            half = (Dn + Dr) // 2\n            q_full = torch.cat((q_nope_BHSDn, q_pe_BHSDr), -1)\n            q1, q2 = q_full[..., :half], q_full[..., half:]\n            k1, k2 = k_BHSDq[..., :half], k_BHSDq[..., half:]'
