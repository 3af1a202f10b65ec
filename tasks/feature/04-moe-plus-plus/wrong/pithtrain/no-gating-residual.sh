#!/usr/bin/env bash
# Wrong solution for 04-moe-plus-plus on pithtrain, which must FAIL: the gold with one rule broken (no gating residual).
set -euo pipefail
git apply "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch"
python3 - <<'PY'
from pathlib import Path
p = Path("pithtrain/models/deepseek_v2.py")
t = p.read_text()
old, new = 'routed_TE = logits_TE if prev_logits_TE is None else logits_TE + prev_logits_TE @ residual_weight_EE.T', 'routed_TE = logits_TE'
assert t.count(old) == 1, "the gold changed: update this wrong case"
p.write_text(t.replace(old, new))
PY
mkdir -p artifacts
cp "$GOLD_DIR/../../gold/pithtrain/feature.json" artifacts/feature.json
