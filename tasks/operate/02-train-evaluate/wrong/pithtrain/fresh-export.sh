#!/usr/bin/env bash
# FAILs for: it is not the trained model
# Wrong: everything as the gold, but the Hugging Face export is then replaced by a freshly initialised model of the
# same config (the gold's evaluate log, which named artifacts/hf-export, stays the newest).
set -euo pipefail
GOLD_DIR="$GOLD_DIR/../../gold/pithtrain" bash "$GOLD_DIR/../../gold/pithtrain/solve.sh"
python - <<'PY'
import shutil
import torch
from transformers import AutoConfig, AutoModelForCausalLM

config = AutoConfig.from_pretrained("artifacts/hf-export")
torch.manual_seed(0)
fresh = AutoModelForCausalLM.from_config(config)
fresh.save_pretrained("artifacts/hf-fresh")
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(f"artifacts/hf-export/{f}", f"artifacts/hf-fresh/{f}")
shutil.rmtree("artifacts/hf-export")
shutil.move("artifacts/hf-fresh", "artifacts/hf-export")
PY
