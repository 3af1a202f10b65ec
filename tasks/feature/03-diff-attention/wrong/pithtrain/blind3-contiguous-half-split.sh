#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: Q1/K1 and Q2/K2 are the first and second halves of the concatenated [no-RoPE, RoPE] head, not the halves of each part.
# Why: With MLA the instruction asks to split the no-RoPE part and the RoPE part each in half; cutting the concatenated head in the middle (the original Diff Transformer's plain split) puts all RoPE dims in Q2/K2 and none in Q1/K1.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  $'            q1 = torch.cat((q_nope_BHSDn[..., :hn], q_pe_BHSDr[..., :hr]), -1)\n            q2 = torch.cat((q_nope_BHSDn[..., hn:], q_pe_BHSDr[..., hr:]), -1)\n            k1 = torch.cat((k_BHSDq[..., :hn], k_BHSDq[..., Dn : Dn + hr]), -1)\n            k2 = torch.cat((k_BHSDq[..., hn:Dn], k_BHSDq[..., Dn + hr :]), -1)' \
  $'            q1, q2 = q_BHSDq[..., : hn + hr], q_BHSDq[..., hn + hr :]\n            k1, k2 = k_BHSDq[..., : hn + hr], k_BHSDq[..., hn + hr :]'
