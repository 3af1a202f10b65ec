#!/usr/bin/env bash
# Train & Evaluate, smoke and gpu1 profiles: multiple-choice accuracy of a Hugging Face export on
# data/eval/continuations.jsonl (evaluate.py). Provided by the task: run it unmodified,
#   bash evaluate.sh artifacts/hf-export
set -euo pipefail
cd "$(dirname "$0")"
MODEL="${1:?usage: bash evaluate.sh HF_EXPORT_DIR}"
mkdir -p artifacts
LOG="artifacts/evaluate-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
{
  python evaluate.py "$MODEL" --data data/eval/continuations.jsonl
} 2>&1 | tee -a "$LOG"
