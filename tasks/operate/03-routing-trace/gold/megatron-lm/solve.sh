#!/usr/bin/env bash
# Gold for Collect Routing Trace on megatron-lm: the provided checkpoint's weights (written by make_checkpoint.py),
# converted to a Megatron-LM torch-format checkpoint (hf_to_megatron.py; Megatron-LM has no converter for this model) and
# loaded with --finetune (weights only, step 0), the corpus tokenized by Megatron's tools/preprocess_data.py, and a
# 4-step run of the provided model_args.sh through routing_trace.py, which records every MoE router's routing.
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) ;;
  smoke) echo "not run on smoke: megatron-core's MoE step needs CUDA (task.toml)" >&2; exit 2 ;;
  paper) echo "not written for paper: 8 GPUs and downloads (task.toml)" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
export HF_HUB_OFFLINE=1
python make_checkpoint.py
python "$GOLD_DIR/hf_to_megatron.py" --hf checkpoint --num-layers 4 --output artifacts/megatron-init
mkdir -p artifacts/tokens
python tools/preprocess_data.py --input data/corpus.jsonl --output-prefix artifacts/tokens/corpus \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model data/tokenizer --append-eod --workers 4
cp "$GOLD_DIR/routing_trace.py" routing_trace.py
source model_args.sh
python -m torch.distributed.run --standalone --nproc-per-node "$NPROC" routing_trace.py "${MODEL_ARGS[@]}" \
  --data-path artifacts/tokens/corpus_text_document --split 100,0,0 --eval-iters 0 --train-iters 4 --log-interval 1 \
  --load artifacts/megatron-init --finetune --ckpt-format torch
