#!/usr/bin/env bash
# Getting Started: 5 training steps of the profile's model and layout (model_args.sh: MODEL_ARGS, NPROC).
# Provided by the task: run it unmodified, with your environment's Python first on PATH.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p artifacts
LOG="artifacts/train-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
source model_args.sh
{
  python -c 'import sys, torch; print("python-prefix:", sys.prefix); print("torch-file:", torch.__file__)'
  torchrun --standalone --nproc-per-node "$NPROC" -m torchtitan.train "${MODEL_ARGS[@]}" --training.steps 5 \
    --metrics.log_freq 1 --dump_folder "runs/getting-started-$(date +%Y%m%d-%H%M%S)"
} 2>&1 | tee -a "$LOG"
