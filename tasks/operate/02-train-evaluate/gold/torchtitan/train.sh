#!/usr/bin/env bash
# Train & Evaluate on torchtitan: 25 steps from random initialisation with the provided gpu1.toml or, on smoke,
# smoke.toml (the profile's shape, batch and layout) on the corpus in artifacts/tokens; the step-25 checkpoint
# (TorchTitan's DCP, model only) goes to artifacts/checkpoint/step-25. On smoke TorchTitan runs on the CPU through the
# provided cpu_standin/ (its sitecustomize.py says what it patches), one thread.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p artifacts
LOG="artifacts/train-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
config=gpu1.toml
if [ -f smoke.toml ]; then  # the smoke profile provides smoke.toml, gpu1 gpu1.toml
  config=smoke.toml
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/cpu_standin" TORCHTITAN_CPU_STANDIN=1 OMP_NUM_THREADS=1
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
{
  python -m torch.distributed.run --standalone --nproc-per-node 1 -m torchtitan.train --job.config_file "$config" \
    --training.steps 25 --training.dataset_path artifacts/tokens --job.dump_folder artifacts \
    --checkpoint.enable --checkpoint.folder checkpoint --checkpoint.interval 25
} 2>&1 | tee -a "$LOG"
