#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: gate scores averaged over heads, so all heads of a query select the same blocks.
# Why: paper/instruction: each query (per head) scores each block by its dot product with the block's mean key and picks its own top k; averaging the scores over heads makes one block choice per token shared by all heads.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD)' \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD).mean(1, keepdim=True).expand(-1, H, -1, -1)'
