#!/usr/bin/env bash
# Train & Evaluate on torchtitan: 25 steps from random initialisation with the provided gpu1.toml (the profile's shape,
# batch and layout) on the corpus in artifacts/tokens; the step-25 checkpoint (TorchTitan's DCP, model only) goes to
# artifacts/checkpoint/step-25.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p artifacts
LOG="artifacts/train-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
{
  python -m torch.distributed.run --standalone --nproc-per-node 1 -m torchtitan.train --job.config_file gpu1.toml \
    --training.steps 25 --training.dataset_path artifacts/tokens --job.dump_folder artifacts \
    --checkpoint.enable --checkpoint.folder checkpoint --checkpoint.interval 25
} 2>&1 | tee -a "$LOG"
