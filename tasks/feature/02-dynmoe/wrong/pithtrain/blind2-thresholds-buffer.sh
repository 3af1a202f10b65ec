#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the per-expert thresholds are a buffer, not a learnable parameter.
# Why: instruction: one learnable threshold g_e per expert, initialised at 0; as a buffer it never receives an optimizer update and stays at 0.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'self.dynmoe_thresholds = nn.Parameter(torch.zeros(cfg.n_routed_experts))' \
  'self.register_buffer("dynmoe_thresholds", torch.zeros(cfg.n_routed_experts))'
