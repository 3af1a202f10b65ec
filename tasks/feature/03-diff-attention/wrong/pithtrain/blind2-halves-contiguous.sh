#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: Q1/Q2 (and K1/K2) are the first and second halves of the concatenated [nope, rope] head, not of each part.
# Why: instruction: with MLA split the no-RoPE part and the RoPE part each in half, Q1 = [first half of q_nope, first half of q_rope]; halving the concatenation puts all the RoPE dims in Q2/K2, so A1 is position-blind.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  '            q1 = torch.cat((q_nope_BHSDn[..., :hn], q_pe_BHSDr[..., :hr]), -1)
            q2 = torch.cat((q_nope_BHSDn[..., hn:], q_pe_BHSDr[..., hr:]), -1)
            k1 = torch.cat((k_BHSDq[..., :hn], k_BHSDq[..., Dn : Dn + hr]), -1)
            k2 = torch.cat((k_BHSDq[..., hn:Dn], k_BHSDq[..., Dn + hr :]), -1)
' \
  '            q_BHSDq = torch.cat((q_nope_BHSDn, q_pe_BHSDr), -1)
            q1, q2 = q_BHSDq[..., : hn + hr], q_BHSDq[..., hn + hr :]
            k1, k2 = k_BHSDq[..., : hn + hr], k_BHSDq[..., hn + hr :]
'
