#!/usr/bin/env bash
# Near miss for 03-diff-attention on torchtitan, which must FAIL: each query/key head is cut into two contiguous halves of [q_nope, q_pe] (Q1 = all no-RoPE dims but the last few, Q2 = the rest + the whole RoPE part).
# Why: For MLA the instruction requires splitting the no-RoPE and the RoPE parts each in half (Q1 = [first half of q_nope, first half of q_rope]); chunk(2) on the concatenated head is the generic Diff-Transformer split an agent would reach for, and the shapes still match.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/diff-attention.patch" \
  $'            q1 = torch.cat([q[..., :hn], q[..., dn : dn + hr]], dim=-1)\n            q2 = torch.cat([q[..., hn:dn], q[..., dn + hr :]], dim=-1)\n            k1 = torch.cat([k[..., :hn], k[..., dn : dn + hr]], dim=-1)\n            k2 = torch.cat([k[..., hn:dn], k[..., dn + hr :]], dim=-1)\n' \
  $'            q1, q2 = q.chunk(2, dim=-1)\n            k1, k2 = k.chunk(2, dim=-1)\n'
