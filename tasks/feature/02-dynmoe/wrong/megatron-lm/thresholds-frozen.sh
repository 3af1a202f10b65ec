#!/usr/bin/env bash
# Near miss for 02-dynmoe on megatron-lm, which must FAIL: the gold with one rule broken (the thresholds are frozen at 0: no gradient, never learned).
# Why: the thresholds g_e are learnable; registered with requires_grad=False they stay at 0 (the seam sees thresholds that do not require grad and never move).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/dynmoe.patch" \
  'self.dynmoe_thresholds = torch.nn.Parameter(' \
  'self.dynmoe_thresholds = torch.nn.Parameter(requires_grad=False, data='
