#!/usr/bin/env bash
# Getting Started, gpu1 profile (one GPU): 5 TorchTitan training steps of a 4-layer DeepSeek-V2-Lite shape (gpu1.toml).
# Provided by the task: run it unmodified, with your environment's Python first on PATH.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p artifacts
LOG="artifacts/train-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1  # the flavor module; no downloads
{
  python -c 'import sys, torch; print("python-prefix:", sys.prefix); print("torch-file:", torch.__file__)'
  python -m torch.distributed.run --standalone --nproc-per-node 1 -m torchtitan.train --job.config_file gpu1.toml \
    --job.dump_folder "runs/getting-started-$(date +%Y%m%d-%H%M%S)"
} 2>&1 | tee -a "$LOG"
