#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the per-head RMS norm ignores its learnable weight, so norm_weight has no effect and no gradient.
# Why: Each head's output is RMS-normalised with a learnable weight of size v_head_dim (gold multiplies by
# norm_weight); dropping it makes the op independent of norm_weight (zero gradient) and the model's norm weight dead.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  ' * torch.rsqrt(o_BHSE.pow(2).mean(-1, keepdim=True) + eps) * norm_weight.float()' \
  ' * torch.rsqrt(o_BHSE.pow(2).mean(-1, keepdim=True) + eps)'
