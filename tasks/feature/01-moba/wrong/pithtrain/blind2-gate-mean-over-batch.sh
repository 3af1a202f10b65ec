#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: block representatives are mean keys pooled over the whole batch, not per sequence.
# Why: instruction: the keys and values of each sequence are cut into blocks, each block represented by the mean of its keys; pooling the block means across the batch lets other sequences' keys steer a sequence's block selection.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD)' \
  'gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q_BSHD.float(), mean_k_BNHD.mean(0, keepdim=True).expand_as(mean_k_BNHD))'
