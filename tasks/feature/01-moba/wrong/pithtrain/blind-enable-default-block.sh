#!/usr/bin/env bash
# Near miss only on smoke: on gpu1 and paper the default block size 256 splits the 2,048-token sequence into the asked 8 blocks, so leaving it in enable is right there
# Near miss for 01-moba on pithtrain, which must FAIL: feature.json's enable leaves the block size at its default 256, so the smoke sequence is one block (dense attention), not 8.
# Why: feature.json's enable must set the block size that splits the smoke sequence (128) into 8 blocks (gold:
# model.moba_block_size=16); here it is left at the default 256, so the whole sequence is one block, the own block is
# always selected and MoBA reduces to dense causal attention.
GOLD_DIR="$GOLD_DIR/../../gold/pithtrain" bash "$GOLD_DIR/../../gold/pithtrain/solve.sh" && python3 - <<'PY'
import json
f = json.load(open("artifacts/feature.json"))
f["enable"] = ["--set", "model.moba=true", "--set", "model.moba_top_k=3"]
json.dump(f, open("artifacts/feature.json", "w"))
PY
