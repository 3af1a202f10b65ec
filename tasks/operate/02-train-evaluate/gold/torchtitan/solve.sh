#!/usr/bin/env bash
# Gold for Train & Evaluate on torchtitan: the corpus as TorchTitan's loader reads it (JSON lines, tokenized as it
# loads), 25 steps (train.sh), the step-25 checkpoint exported to Hugging Face format by export_hf.py (TorchTitan
# 0.2.2 has a state-dict adapter but no offline converter), then the provided evaluate.sh on the export.
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) flavor=deepseek_v2_lite_4l seq_len=2048 ;;
  smoke) flavor=deepseek_v2_smoke seq_len=64 ;;  # train.sh runs smoke.toml on the CPU through cpu_standin/
  paper) echo "not written for paper: 8 GPUs and downloads (task.toml)" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
mkdir -p artifacts/tokens
cp data/corpus.jsonl artifacts/tokens/corpus.jsonl
cp "$GOLD_DIR/train.sh" train.sh
bash train.sh
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python "$GOLD_DIR/export_hf.py" --checkpoint artifacts/checkpoint/step-25 \
  --flavor "$flavor" --seq-len "$seq_len" --tokenizer data/tokenizer --output artifacts/hf-export
bash evaluate.sh artifacts/hf-export
