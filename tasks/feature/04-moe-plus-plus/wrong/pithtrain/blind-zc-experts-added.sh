#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the four zero-computation experts are added on top of n_routed_experts (8 FFN + 4 = 12 experts in smoke) instead of taken out of it (4 FFN + 4).
# Why: In the smoke profile the model keeps its expert count and the 1 zero + 1 copy + 2 constant experts are taken
# out of it (gold: 4 FFN + 4 zero-computation = 8 experts, ffn_experts = n_routed_experts - 4); here they are added on
# top (8 FFN + 4 = 12 experts, a 12-wide router and W_g).
GOLD_DIR="$GOLD_DIR/../../gold/pithtrain" bash "$GOLD_DIR/../../gold/pithtrain/solve.sh" && python3 - <<'PY'
from pathlib import Path
p = Path("pithtrain/models/deepseek_v2.py")
s = p.read_text()
for old, new in [
    ("return cfg.n_routed_experts - (MOEPP_ZERO + MOEPP_COPY + MOEPP_CONSTANT if cfg.moepp else 0)",
     "return cfg.n_routed_experts"),
    ("self.gate = nn.Linear(cfg.hidden_size, cfg.n_routed_experts, bias=False)",
     "self.gate = nn.Linear(\n            cfg.hidden_size, cfg.n_routed_experts + (MOEPP_ZERO + MOEPP_COPY + MOEPP_CONSTANT if cfg.moepp else 0),\n            bias=False,\n        )"),
    ("E, D = cfg.n_routed_experts, cfg.hidden_size", "E, D = self.gate.out_features, cfg.hidden_size"),
]:
    assert s.count(old) == 1, old
    s = s.replace(old, new)
p.write_text(s)
PY
