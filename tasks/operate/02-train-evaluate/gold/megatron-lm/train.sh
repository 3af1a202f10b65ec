#!/usr/bin/env bash
# Train & Evaluate on megatron-lm: 25 steps from random initialisation with the provided model_args.sh (the profile's
# shape, batch and layout) on the corpus in artifacts/tokens (Megatron's indexed dataset, all of it for training), warm-up
# 2 steps then cosine to 3e-5 as the other frameworks' configs; the step-25 checkpoint, model only, in Megatron's torch
# format, goes to artifacts/checkpoint/iter_0000025.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p artifacts
LOG="artifacts/train-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
source model_args.sh
{
  python -m torch.distributed.run --standalone --nproc-per-node "$NPROC" pretrain_gpt.py "${MODEL_ARGS[@]}" \
    --data-path artifacts/tokens/corpus_text_document --split 100,0,0 --eval-iters 0 --train-iters 25 \
    --lr-warmup-iters 2 --lr-decay-style cosine --min-lr 3e-5 --log-interval 1 \
    --save artifacts/checkpoint --save-interval 25 --ckpt-format torch --no-save-optim --no-save-rng
} 2>&1 | tee -a "$LOG"
