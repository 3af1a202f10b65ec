#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the four zero-computation experts are added on top of the model's expert count (8 FFN + 4 in smoke) instead of taken out of it.
# Why: instruction: in the smoke profile keep the model's expert count and take the four zero-computation experts out of it (60 FFN of 64 at full size); this keeps all n_routed_experts FFN experts and widens the router to n_routed_experts + 4.
set -euo pipefail
python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'return cfg.n_routed_experts - (MOEPP_ZERO + MOEPP_COPY + MOEPP_CONSTANT if cfg.moepp else 0)' \
  'return cfg.n_routed_experts'
python3 - <<'PY'
from pathlib import Path
p = Path('pithtrain/models/deepseek_v2.py')
t = p.read_text()
assert t.count('self.gate = nn.Linear(cfg.hidden_size, cfg.n_routed_experts, bias=False)') == 1
p.write_text(t.replace('self.gate = nn.Linear(cfg.hidden_size, cfg.n_routed_experts, bias=False)', 'self.gate = nn.Linear(cfg.hidden_size, cfg.n_routed_experts + (4 if cfg.moepp else 0), bias=False)'))
PY
python3 - <<'PY'
from pathlib import Path
p = Path('pithtrain/models/deepseek_v2.py')
t = p.read_text()
assert t.count('E, D = cfg.n_routed_experts, cfg.hidden_size') == 1
p.write_text(t.replace('E, D = cfg.n_routed_experts, cfg.hidden_size', 'E, D = cfg.n_routed_experts + 4, cfg.hidden_size'))
PY
