#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: q and k are split in half as the concatenated [nope, rope] vector, not the no-RoPE and RoPE parts each in half.
# Why: With MLA, Q1 = [first half of q_nope, first half of q_rope] and Q2 the second halves (same for keys; gold
# builds them so); chunking the concatenated head puts no RoPE part in Q1/K1 and all of it in Q2/K2.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  $'            q1 = torch.cat((q_nope_BHSDn[..., :hn], q_pe_BHSDr[..., :hr]), -1)\n            q2 = torch.cat((q_nope_BHSDn[..., hn:], q_pe_BHSDr[..., hr:]), -1)\n            k1 = torch.cat((k_BHSDq[..., :hn], k_BHSDq[..., Dn : Dn + hr]), -1)\n            k2 = torch.cat((k_BHSDq[..., hn:Dn], k_BHSDq[..., Dn + hr :]), -1)\n' \
  $'            q1, q2 = q_BHSDq.chunk(2, dim=-1)\n            k1, k2 = k_BHSDq.chunk(2, dim=-1)\n'
