#!/usr/bin/env bash
# One diagnosis call on the GPU machine (nvidia-h200-x2), from the repository root:
#   bash benchmarks/gpu_profile.sh
# kernel rates (benchmarks/kernel_probe.py), then where a training step's GPU time goes
# (benchmarks/profile_step.py) on the first local config: 1 GPU eager and compiled, EP2 eager.
# Leaves kernel_probe.txt and profile-*.txt under $OUT. Numbers here guide the work; throughput figures
# come from benchmarks/gpu_run.sh.
set -uo pipefail
OUT=${OUT:-/tmp/gpu_profile_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
echo "== kernel probe"; timeout 120 python3 benchmarks/kernel_probe.py --out "$OUT"
for extra in "--variant eager" "--variant compiled"; do
  echo "== profile 1 GPU $extra"
  timeout 200 python3 benchmarks/profile_step.py --config qwen3-30b-a3b-4l $extra --out "$OUT" 2>&1 | tail -n 45
done
echo "== profile EP2"
timeout 200 torchrun --standalone --nproc-per-node 2 benchmarks/profile_step.py --config qwen3-30b-a3b-4l --ep 2 \
  --out "$OUT" 2>&1 | grep -v "^W1\|OMP_NUM" | tail -n 45
echo "== done in ${SECONDS} s"
