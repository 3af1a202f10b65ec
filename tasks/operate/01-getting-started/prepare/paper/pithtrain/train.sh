#!/usr/bin/env bash
# Getting Started, paper profile (8 GPUs): 5 training steps of DeepSeek-V2-Lite, PP4 x EP2 (paper.toml), as the paper ran it.
# Provided by the task: run it unmodified, with your environment's Python first on PATH.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p artifacts
LOG="artifacts/train-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
{
  python -c 'import sys, torch; print("python-prefix:", sys.prefix); print("torch-file:", torch.__file__)'
  torchrun --standalone --nproc-per-node 8 -m pithtrain train paper.toml --set run_dir="runs/getting-started-$(date +%Y%m%d-%H%M%S)"
} 2>&1 | tee -a "$LOG"
