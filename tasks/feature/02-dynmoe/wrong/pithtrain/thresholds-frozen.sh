#!/usr/bin/env bash
# Wrong solution for 02-dynmoe on pithtrain, which must FAIL: the gold with one rule broken (the thresholds are frozen at 0: no gradient, never learned).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'self.dynmoe_thresholds = nn.Parameter(torch.zeros(cfg.n_routed_experts))' \
  'self.dynmoe_thresholds = nn.Parameter(torch.zeros(cfg.n_routed_experts), requires_grad=False)'
