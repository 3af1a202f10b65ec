#!/usr/bin/env bash
# Gold for Report Heavy Kernels on megatron-lm: a 4-step run of the provided model_args.sh on mock data (as the provided
# Getting Started run) through profile_step.py, which profiles step 4 alone with torch.profiler after 3 warm-up steps;
# then top_kernels.py (the TorchTitan gold's: it reads any torch.profiler Chrome trace) keeps the trace and writes the CSV.
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) ;;
  smoke) echo "not run on smoke: megatron-core's MoE step needs CUDA (task.toml)" >&2; exit 2 ;;
  paper) echo "not written for paper: the paper profiled 8 ranks with nsys" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
export HF_HUB_OFFLINE=1
cp "$GOLD_DIR/profile_step.py" profile_step.py
source model_args.sh
python -m torch.distributed.run --standalone --nproc-per-node "$NPROC" profile_step.py "${MODEL_ARGS[@]}" --mock-data \
  --eval-iters 0 --train-iters 4 --log-interval 1
python "$GOLD_DIR/top_kernels.py" artifacts/heavy-kernels/run/trace.json
