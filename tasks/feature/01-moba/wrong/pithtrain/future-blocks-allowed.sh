#!/usr/bin/env bash
# Wrong solution for 01-moba on pithtrain, which must FAIL: the gold with one rule broken (blocks after the query's own may win a top-k place).
set -euo pipefail
git apply "$GOLD_DIR/../../gold/pithtrain/moba.patch"
python3 - <<'PY'
from pathlib import Path
p = Path("pithtrain/models/deepseek_v2.py")
t = p.read_text()
old, new = 'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN', 'gate_BHSN = gate_BHSN.masked_fill(own_SN'
assert t.count(old) == 1, "the gold changed: update this wrong case"
p.write_text(t.replace(old, new))
PY
mkdir -p artifacts
cp "$GOLD_DIR/../../gold/pithtrain/feature.json" artifacts/feature.json
