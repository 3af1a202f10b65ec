#!/usr/bin/env bash
# Wrong solution for 02-dynmoe on pithtrain, which must FAIL: the gold with one rule broken (the sign has no straight-through gradient).
set -euo pipefail
git apply "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch"
python3 - <<'PY'
from pathlib import Path
p = Path("pithtrain/models/deepseek_v2.py")
t = p.read_text()
old, new = '_SignStraightThrough.apply(margin_TE)', 'torch.sign(margin_TE).detach()'
assert t.count(old) == 1, "the gold changed: update this wrong case"
p.write_text(t.replace(old, new))
PY
mkdir -p artifacts
cp "$GOLD_DIR/../../gold/pithtrain/feature.json" artifacts/feature.json
