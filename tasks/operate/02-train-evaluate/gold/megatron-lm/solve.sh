#!/usr/bin/env bash
# Gold for Train & Evaluate on megatron-lm: the corpus tokenized by Megatron's own tools/preprocess_data.py into its
# indexed dataset (artifacts/tokens/corpus_text_document.{bin,idx}, an end-of-document token after each line), 25 steps
# (train.sh), the step-25 checkpoint exported to Hugging Face format by export_hf.py (Megatron-LM has no exporter for
# this model), then the provided evaluate.sh on the export.
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) ;;
  smoke) echo "not run on smoke: megatron-core's MoE step needs CUDA (task.toml)" >&2; exit 2 ;;
  paper) echo "not written for paper: 8 GPUs and downloads (task.toml)" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
export HF_HUB_OFFLINE=1
mkdir -p artifacts/tokens
python tools/preprocess_data.py --input data/corpus.jsonl --output-prefix artifacts/tokens/corpus \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model data/tokenizer --append-eod --workers 4
cp "$GOLD_DIR/train.sh" train.sh
bash train.sh
# the checkpoint pickles the run's arguments (Megatron's enums among them): unpickling imports the workspace's megatron
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python "$GOLD_DIR/export_hf.py" --checkpoint artifacts/checkpoint \
  --tokenizer data/tokenizer --output artifacts/hf-export
bash evaluate.sh artifacts/hf-export
