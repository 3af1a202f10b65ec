#!/usr/bin/env bash
# Near miss only on smoke: on gpu1 and paper the default block size 256 splits the 2,048-token sequence into the asked 8 blocks, so leaving it in enable is right there
# Near miss for 01-moba on pithtrain, which must FAIL: feature.json leaves model.moba_block_size at the default 256, one block for the smoke sequence of 128.
# Why: instruction (deliverable 3): choose the block size so the smoke profile's sequence splits into 8 blocks and put it in enable; with B = 256 > 128 there is one block, so MoBA degenerates to dense causal attention in verify/train.
set -euo pipefail
python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'moba_block_size: Positive = 256' \
  'moba_block_size: Positive = 256'
python3 - <<'PY'
import json
f = json.load(open('artifacts/feature.json'))
i = f['enable'].index('--set', 2)
del f['enable'][i:i + 2]
json.dump(f, open('artifacts/feature.json', 'w'))
PY
