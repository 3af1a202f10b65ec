#!/usr/bin/env bash
# Train & Evaluate, paper profile: HellaSwag zero-shot through lm-eval with vLLM, as the paper ran it (near chance is
# expected after 25 steps). Provided by the task: run it unmodified,
#   bash evaluate.sh artifacts/hf-export
set -euo pipefail
cd "$(dirname "$0")"
MODEL="${1:?usage: bash evaluate.sh HF_EXPORT_DIR}"
mkdir -p artifacts
LOG="artifacts/evaluate-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
{
  lm_eval --model vllm --model_args "pretrained=$MODEL,dtype=bfloat16,tensor_parallel_size=1" \
    --tasks hellaswag --num_fewshot 0 --batch_size auto
} 2>&1 | tee -a "$LOG"
