#!/usr/bin/env bash
# Getting Started, smoke profile (CPU): 5 TorchTitan training steps of a tiny DeepSeek-V2 (smoke.toml).
# Provided by the task: run it unmodified, with your environment's Python first on PATH.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p artifacts
LOG="artifacts/train-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
# the flavor module; the CPU stand-in TorchTitan needs here (cpu_standin/sitecustomize.py), one thread; no downloads
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}:$PWD/cpu_standin" TORCHTITAN_CPU_STANDIN=1 OMP_NUM_THREADS=1 \
  HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
{
  python -c 'import sys, torch; print("python-prefix:", sys.prefix); print("torch-file:", torch.__file__)'
  python -m torch.distributed.run --standalone --nproc-per-node 1 -m torchtitan.train --job.config_file smoke.toml \
    --job.dump_folder "runs/getting-started-$(date +%Y%m%d-%H%M%S)"
} 2>&1 | tee -a "$LOG"
