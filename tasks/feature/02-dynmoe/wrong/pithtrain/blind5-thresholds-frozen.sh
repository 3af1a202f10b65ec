#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the per-expert thresholds are registered with requires_grad=False, so they stay at 0.
# Why: the thresholds must be learnable; an agent treating them like a fixed hyper-parameter, or freezing them to keep the optimizer state unchanged, still gets a working top-any gate.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'self.dynmoe_thresholds = nn.Parameter(torch.zeros(cfg.n_routed_experts))' \
  'self.dynmoe_thresholds = nn.Parameter(torch.zeros(cfg.n_routed_experts), requires_grad=False)'
