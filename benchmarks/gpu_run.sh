#!/usr/bin/env bash
# One call on the GPU machine (nvidia-h200 or -x2, no network, no nox), from the repository root, carrying .whl/
# (and .bench-head/, see below):
#   bash benchmarks/gpu_run.sh
# 1. installs the carried wheels (TorchTitan 0.2.2 and what the image lacks) into /tmp/site;
# 2. runs the operator tests on CUDA (Triton kernels, FP8 matmuls) unless TESTS=0;
# 3. measures the matmul rates of the step's shapes (benchmarks/kernel_probe.py) unless PROBE=0;
# 4. trains FP8 against BF16 for 300 steps (benchmarks/fp8_convergence.py) on qwen3_moe, deepseek_v2 and gpt_oss,
#    the six trainings at once on the GPU (so their step times are shared-GPU ones), unless CONVERGENCE=0;
# 5. checks PP2 and EP2 against one GPU with NCCL (benchmarks/engine_check.py) when ENGINE=1;
# 5b. with CKPT=1, measures how long a checkpoint save stops training, sync against async, on the 1.3B shape
#    (qwen3-30b-a3b-4l cut to 32 experts: benchmarks/checkpoint_stall.py); $OUT/checkpoint_stall.json;
# 6. with SKILLS=1, runs the GPU forms of three skills (benchmarks/gpu_skills.sh: capture-profile, validate-performance,
#    estimate-memory) alone on the GPU, since two of them time; $OUT/skills/ gets its log and kernels.csv;
# 7. with ATE_GPU1=1, runs the gpu1 golds of the operate and feature tasks side by side (tasks/operate/gpu1_golds.sh,
#    tasks/feature/gpu1_golds.sh), each inside ATE_BUDGET_S (default 360 s): $OUT/operate/ and $OUT/feature-gpu1*;
#    with the blind near misses the feature cells need more than that: run tasks/feature/gpu1_golds.sh on its own,
#    in the two calls and the liveness call that tasks/feature/README.md gives;
# 7a. with ATE_SANDBOX=1, runs the agent sandbox's tests that need no git checkout (tests/ate_bench/test_isolation.py:
#    the sandbox held as root and as `nobody`, nvidia-smi and a CUDA tensor inside it): $OUT/ate_sandbox.log;
# 7b. with ATE_TORCHTITAN=1, runs the operate tasks' gpu1 golds on TorchTitan 0.2.2 alone on the GPU
#    (FRAMEWORK=torchtitan tasks/operate/gpu1_golds.sh; carry its sdist as .whl/torchtitan-0.2.2.tar.gz beside the
#    wheels), inside ATE_BUDGET_S: $OUT/operate-torchtitan/;
# 7c. with PROFILE="CONFIG:VARIANT[:base] ...", runs benchmarks/profile_step.py on each (VARIANT eager, compiled or fp8;
#    ":base" runs it from .bench-base/base.tar, `git archive` of the commit before a change, for a before/after pair
#    in one call); their tables go to $OUT/profiles.txt;
# 8. runs the throughput comparison on each of CONFIGS (default qwen3-30b-a3b-4l and -8l) on GPUS (default 1; 1,2
#    adds EP2), with FRAMEWORKS (default: pithtrain eager, compiled and FP8, TorchTitan compiled, and megatron-core:
#    benchmarks/megatron_core_run.py, its wheel carried in .whl/), in a random order within each block, STEPS
#    warm-up and timed steps (default 10,20) (EXTRA adds options, e.g. --both-routings). An entry NAME:OPTIONS adds
#    options to that config's call alone, e.g.
#    CONFIGS="deepseek-v2-lite-6l qwen3-30b-a3b-4l:--balanced-routing" (a later --frameworks replaces FRAMEWORKS);
# 9. leaves under $OUT: env.txt, operators.log, kernel_probe.txt, fp8_convergence/*.json (one per family), engine_check/, checkpoint_stall.json, throughput.txt,
#    throughput/<call id>.jsonl, logs.tar.gz, and prints the table last, then the time per layer of every shape run
#    at two depths (benchmarks/per_layer.py: qwen3-30b-a3b-4l with -8l). Everything ends inside BUDGET_S seconds
#    (runs that would start too late are recorded as skipped), so the call fits a 600 s limit. Keep the files under
#    $OUT to 8: the device tool brings back no more.
#
# The tree that travels has no .git and may hold colleagues' uncommitted edits. To measure a commit, carry
# `git archive` of it: `mkdir -p .bench-head && git archive -o .bench-head/head.tar HEAD &&
# git rev-parse HEAD > .bench-head/commit` here, then this script runs from that archive and the records name
# the commit with git_dirty = false. Without the archive it runs the tree as it came (git_dirty unknown).
set -uo pipefail
OUT=${OUT:-/tmp/gpu_run_out}
BUDGET_S=${BUDGET_S:-500}
STEPS=${STEPS:-10,20}
EXTRA=${EXTRA:-}
CONFIGS=${CONFIGS-qwen3-30b-a3b-4l qwen3-30b-a3b-8l}  # CONFIGS="" runs none
FRAMEWORKS=${FRAMEWORKS:-pithtrain,pithtrain-compiled,pithtrain-fp8,torchtitan-compiled,megatron-core}
GPUS=${GPUS:-1}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

if [ -f .bench-base/base.tar ]; then
  rm -rf /tmp/pith-base && mkdir -p /tmp/pith-base && tar -xf .bench-base/base.tar -C /tmp/pith-base \
    && echo "base tree for profiles: $(cat .bench-base/commit)"
fi
if [ -f .bench-head/head.tar ]; then
  rm -rf /tmp/pith-head && mkdir -p /tmp/pith-head && tar -xf .bench-head/head.tar -C /tmp/pith-head \
    && { [ ! -d .whl ] || cp -r .whl /tmp/pith-head/; } && export PITH_GIT_COMMIT=$(cat .bench-head/commit) PITH_GIT_DIRTY=0 \
    && cd /tmp/pith-head && echo "running from the archive of $PITH_GIT_COMMIT"
fi

if ls .whl/*.whl > /dev/null 2>&1; then  # the baselines' wheels; a call without throughput runs may carry none
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site
fi

{
  date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)=' || echo "multicast variables unset"
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__, torch.cuda.device_count())"
  python3 -c "import torchtitan, datasets, torchdata, tyro; print('torchtitan', torchtitan.__version__, 'datasets', datasets.__version__)"
  echo "commit ${PITH_GIT_COMMIT:-unknown}, git_dirty ${PITH_GIT_DIRTY:-unknown}"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [ "${TESTS:-1}" = 1 ]; then
  echo "== operator tests on CUDA"
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_operators.py tests/test_fp8_gemm.py tests/test_fp8_linear.py \
    -k "not training" > "$OUT/operators.log" 2>&1
  echo "operators: exit $? ($(tail -n 1 "$OUT/operators.log"))"
fi

if [ "${PROBE:-1}" = 1 ]; then
  echo "== kernel probe"
  timeout 120 python3 benchmarks/kernel_probe.py --out "$OUT"
fi
if [ "${CONVERGENCE:-1}" = 1 ]; then
  echo "== FP8 against BF16, 300 steps, three families"
  timeout 240 python3 benchmarks/fp8_convergence.py --out "$OUT/fp8_convergence" > "$OUT/fp8_convergence.log" 2>&1
  grep -E "^(PASS|FAIL)" "$OUT/fp8_convergence.log" || tail -n 20 "$OUT/fp8_convergence.log"
fi

if [ "${ENGINE:-0}" = 1 ]; then
  echo "== engine check: PP2 and EP2 against one GPU"
  # Its run folders stay in /tmp: $OUT brings back 8 files at most.
  timeout 200 python3 benchmarks/engine_check.py --models "${ENGINE_MODELS:-tiny,mid}" --out /tmp/engine_check \
    > "$OUT/engine_check.log" 2>&1
  echo "engine check: exit $?"; tail -n 8 "$OUT/engine_check.log"; cp /tmp/engine_check/engine_check.json "$OUT/"
fi

if [ "${CKPT:-0}" = 1 ]; then
  echo "== checkpoint stall: sync against async saves, 1.3B parameters"
  timeout "${CKPT_BUDGET_S:-420}" python3 benchmarks/checkpoint_stall.py --out "$OUT" 2>&1 | grep -v "^W1\|OMP_NUM" | tail -n 8
fi

if [ "${SKILLS:-0}" = 1 ]; then
  echo "== skills, GPU forms"
  OUT="$OUT" timeout "${SKILLS_BUDGET_S:-240}" bash benchmarks/gpu_skills.sh 2>&1 | tail -n 12
fi
if [ "${ATE_GPU1:-0}" = 1 ]; then
  echo "== ATE-Bench gpu1 golds: operate and feature tasks side by side (budget ${ATE_BUDGET_S:-360} s each)"
  (OUT="$OUT/operate" BUDGET_S=${ATE_BUDGET_S:-360} bash tasks/operate/gpu1_golds.sh > /tmp/operate-gpu1.txt 2>&1) &
  (OUT="$OUT" BUDGET_S=${ATE_BUDGET_S:-360} bash tasks/feature/gpu1_golds.sh > /tmp/feature-gpu1.txt 2>&1) &
  wait
  echo "-- operate"; tail -n 12 /tmp/operate-gpu1.txt; echo "-- feature"; tail -n 30 /tmp/feature-gpu1.txt
fi

if [ "${ATE_SANDBOX:-0}" = 1 ]; then
  echo "== ATE-Bench sandbox on the GPU machine"
  timeout 240 python3 -m pytest -q -p no:cacheprovider -rs tests/ate_bench/test_isolation.py \
    -k "sandbox_holds or gpus_are_usable" > "$OUT/ate_sandbox.log" 2>&1
  echo "ate sandbox: exit $? ($(tail -n 1 "$OUT/ate_sandbox.log"))"
fi

if [ "${ATE_TORCHTITAN:-0}" = 1 ]; then
  echo "== ATE-Bench gpu1 operate golds on TorchTitan (budget ${ATE_BUDGET_S:-360} s)"
  OUT="$OUT/operate-torchtitan" FRAMEWORK=torchtitan BUDGET_S=${ATE_BUDGET_S:-360} bash tasks/operate/gpu1_golds.sh 2>&1 \
    | tail -n 12
fi

for entry in ${PROFILE:-}; do
  IFS=: read -r config variant which <<< "$entry"
  tree=.; [ "$which" = base ] && tree=/tmp/pith-base
  echo "== profile $config $variant (${which:-this tree}; deadline $((BUDGET_S - SECONDS - 15)) s)" | tee -a "$OUT/profiles.txt"
  if [ $((BUDGET_S - SECONDS)) -lt 120 ]; then echo "skipped: under 120 s left" | tee -a "$OUT/profiles.txt"; continue; fi
  (cd "$tree" && timeout $((BUDGET_S - SECONDS - 15)) python3 benchmarks/profile_step.py --config "$config" \
    --variant "$variant" --out /tmp/profiles 2>&1) | grep -v "^W1\|OMP_NUM" | tail -n 45 >> "$OUT/profiles.txt"
  grep -A 12 "^kind" "$OUT/profiles.txt" | tail -n 13; grep "step wall time" "$OUT/profiles.txt" | tail -n 1
done

entry_index=0
for entry in $CONFIGS; do
  config=${entry%%:*}
  options=$([ "$config" = "$entry" ] || echo "${entry#*:}" | tr ':' ' ')
  echo "== throughput $config $options (deadline $((BUDGET_S - SECONDS - 15)) s)"
  python3 benchmarks/throughput.py --config "$config" --gpus "$GPUS" --steps "$STEPS" --frameworks "$FRAMEWORKS" \
    --out "$OUT/throughput" --logs "/tmp/bench-logs/$((++entry_index))-$config" --run-timeout 240 --deadline $((BUDGET_S - SECONDS - 15)) $EXTRA \
    $options 2>&1 | tee -a "$OUT/throughput.txt"
done
tar -czf "$OUT/logs.tar.gz" -C /tmp bench-logs 2>/dev/null
[ -d "$OUT/throughput" ] && python3 benchmarks/per_layer.py "$OUT/throughput" > /tmp/per_layer.txt 2>&1 \
  && cat /tmp/per_layer.txt >> "$OUT/throughput.txt"
echo "== done in ${SECONDS} s"
awk '/^framework /{p=1} /^(measured bf16|peak measurement)/{p=0} p' "$OUT/throughput.txt"
[ -f /tmp/per_layer.txt ] && cat /tmp/per_layer.txt
