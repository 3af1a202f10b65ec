#!/usr/bin/env bash
# One diagnosis call on the GPU machine (nvidia-h200-x2), from the repository root:
#   bash benchmarks/gpu_profile.sh
# kernel rates (benchmarks/kernel_probe.py), then where a training step's GPU time goes
# (benchmarks/profile_step.py) on CONFIG (default qwen3-30b-a3b-4l): 1 GPU for each of VARIANTS (default
# "eager compiled"; fp8 is compiled + FP8), then EP2 (EP2_VARIANT, default eager) when EP2=1 (the default;
# it needs 2 GPUs).
# PROBE=0 skips the probe. Leaves kernel_probe.txt and profile-*.txt under $OUT. Numbers here guide the work; throughput figures
# come from benchmarks/gpu_run.sh.
set -uo pipefail
OUT=${OUT:-/tmp/gpu_profile_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
CONFIG=${CONFIG:-qwen3-30b-a3b-4l}
if [ "${PROBE:-1}" = 1 ]; then echo "== kernel probe"; timeout 150 python3 benchmarks/kernel_probe.py --out "$OUT"; fi
for variant in ${VARIANTS:-eager compiled}; do
  echo "== profile $CONFIG 1 GPU $variant"
  timeout 200 python3 benchmarks/profile_step.py --config "$CONFIG" --variant "$variant" --out "$OUT" 2>&1 | tail -n 45
done
if [ "${EP2:-1}" = 1 ]; then
  echo "== profile $CONFIG EP2 ${EP2_VARIANT:-eager}"
  timeout 200 torchrun --standalone --nproc-per-node 2 benchmarks/profile_step.py --config "$CONFIG" --ep 2 \
    --variant "${EP2_VARIANT:-eager}" --out "$OUT" 2>&1 | grep -v "^W1\|OMP_NUM" | tail -n 45
fi
echo "== done in ${SECONDS} s"
