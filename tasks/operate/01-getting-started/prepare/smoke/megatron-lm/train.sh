#!/usr/bin/env bash
# Getting Started: 5 training steps of the profile's model and layout (model_args.sh: MODEL_ARGS, NPROC), on mock data,
# then a checkpoint (model and optimizer, Megatron's torch format) under runs/.
# Provided by the task: run it unmodified, with your environment's Python first on PATH (needs Megatron-LM's
# pretrain_gpt.py: the git checkout, not the megatron-core sdist).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p artifacts
LOG="artifacts/train-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
source model_args.sh
{
  python -c 'import sys, torch; print("python-prefix:", sys.prefix); print("torch-file:", torch.__file__)'
  python -m torch.distributed.run --standalone --nproc-per-node "$NPROC" pretrain_gpt.py "${MODEL_ARGS[@]}" \
    --mock-data --train-iters 5 --log-interval 1 --save "runs/getting-started-$(date +%Y%m%d-%H%M%S)" \
    --save-interval 5 --ckpt-format torch
} 2>&1 | tee -a "$LOG"
