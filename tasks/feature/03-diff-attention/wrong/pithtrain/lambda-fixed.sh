#!/usr/bin/env bash
# Wrong solution for 03-diff-attention on pithtrain, which must FAIL: the gold with one rule broken (lambda is fixed at lambda_init).
set -euo pipefail
git apply "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch"
python3 - <<'PY'
from pathlib import Path
p = Path("pithtrain/models/deepseek_v2.py")
t = p.read_text()
old, new = '    lam = lam + lambda_init\n', '    lam = lambda_init  # fixed, never learned\n'
assert t.count(old) == 1, "the gold changed: update this wrong case"
p.write_text(t.replace(old, new))
PY
mkdir -p artifacts
cp "$GOLD_DIR/../../gold/pithtrain/feature.json" artifacts/feature.json
