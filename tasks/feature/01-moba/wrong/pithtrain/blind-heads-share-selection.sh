#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: block selection is shared by all heads (gate scores averaged over heads) instead of each query head choosing its own.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD)' \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD).mean(1, keepdim=True)'
