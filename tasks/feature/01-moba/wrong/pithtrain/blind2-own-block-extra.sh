#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: selects the top k earlier blocks and then adds the own block on top, k+1 blocks in all.
# Why: instruction/paper: of the candidates the top k blocks are kept, the own block counting as one of the k (top-3 = 62.5% sparsity at 8 blocks); this keeps k past blocks plus the own block, so each query sees 4 blocks.
set -euo pipefail
python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))' \
  'gate_BHSN = gate_BHSN.masked_fill(future_SN | own_SN, float("-inf"))'
python3 - <<'PY'
from pathlib import Path
p = Path('pithtrain/models/deepseek_v2.py')
t = p.read_text()
assert t.count('.scatter_(-1, chosen_BHSK, True) & ~future_SN') == 1
p.write_text(t.replace('.scatter_(-1, chosen_BHSK, True) & ~future_SN', '.scatter_(-1, chosen_BHSK, True) & ~future_SN | own_SN'))
PY
