#!/usr/bin/env bash
# FAILs for: it is not the trained model
# Near miss only on gpu1: Megatron-LM runs only there (task.toml marks its smoke and paper golds unrunnable)
# Wrong: everything as the gold (preprocess_data.py, 25 steps to the torch-format checkpoint, export_hf.py, evaluate.sh
# on the export), but the Hugging Face export is then replaced by a freshly initialised DeepseekV2 of the export's own
# config.json, in bfloat16 as the export, with the tokenizer's files beside it as before. The gold's evaluate log, which
# named artifacts/hf-export, stays the newest; the checkpoint is the trained one.
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) ;;
  smoke) echo "not run on smoke: megatron-core's MoE step needs CUDA (task.toml)" >&2; exit 2 ;;
  paper) echo "not written for paper: 8 GPUs and downloads (task.toml)" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
GOLD_DIR="$GOLD_DIR/../../gold/megatron-lm" bash "$GOLD_DIR/../../gold/megatron-lm/solve.sh"
python - <<'PY'
import shutil
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

export, fresh_dir = Path("artifacts/hf-export"), Path("artifacts/hf-fresh")
config = AutoConfig.from_pretrained(export)
torch.manual_seed(0)
with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
fresh.save_pretrained(fresh_dir)
for f in export.iterdir():  # the tokenizer's files; the weights and config.json are the fresh model's
    if not f.name.startswith("model") and not (fresh_dir / f.name).exists():
        shutil.copy(f, fresh_dir / f.name)
shutil.rmtree(export)
shutil.move(fresh_dir, export)
print(f"replaced {export} with a freshly initialised model of its config")
PY
