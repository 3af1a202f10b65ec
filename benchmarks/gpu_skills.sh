#!/usr/bin/env bash
# The GPU forms of three skills in one call on the GPU machine (one GPU, no network), from the repository root:
#   bash benchmarks/gpu_skills.sh           # GPU: about 2-3 minutes
#   CPU=1 bash benchmarks/gpu_skills.sh     # the same steps on CPU at the tiny size (a dry run of this script)
# 1. capture-profile: 3 warm-up steps, one profiled step (nsys when on PATH, else torch.profiler), CSV checked;
# 2. validate-performance: base, this tree, base, this tree; the base is .bench-head/head.tar when carried (see
#    benchmarks/gpu_run.sh), else a copy of this tree (then the verdict measures run-to-run noise only);
# 3. estimate-memory: the estimate against torch.cuda.max_memory_allocated after 3 steps (--error 0.25).
# Writes $OUT/skills/log.txt (every command and its output) and $OUT/skills/kernels.csv, and prints a table last.
# A skill that FAILs or crashes is reported as such; the script goes on to the next one.
set -uo pipefail
OUT=${OUT:-/tmp/gpu_skills_out}
mkdir -p "$OUT/skills"
LOG="$OUT/skills/log.txt"
: > "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}
SCRATCH=$(mktemp -d /tmp/pith-skills-XXXXXX)
CONFIG=examples/qwen3-moe-tiny.toml
if [ "${CPU:-0}" = 1 ]; then
  SETS=(--set 'training.device="cpu"')
  MEMORY_FORM=()
else
  # A step long enough to time (about 8K tokens, 8 layers of 16 experts), short enough for 4 runs in a minute or two.
  SETS=(--set model.hidden_size=1024 --set model.num_hidden_layers=8 --set model.num_attention_heads=8
        --set model.num_key_value_heads=4 --set model.head_dim=128 --set model.num_experts=16
        --set model.moe_intermediate_size=512 --set model.max_position_embeddings=1024 --set data.seq_len=512
        --set training.global_batch_size=16 --set training.micro_batch_size=8)
  MEMORY_FORM=(--gpu --steps 3 --error 0.25)
fi

run() {  # run NAME CMD...: its output goes to the log; its PASS/FAIL lines to the table
  local name=$1 start=$SECONDS
  shift
  timeout 200 "$@" > "$SCRATCH/$name.out" 2>&1
  local rc=$?
  { echo "== $name: $*"; cat "$SCRATCH/$name.out"; echo "rc=$rc seconds=$((SECONDS - start))"; } >> "$LOG"
  local verdict
  verdict=$(grep -E '^(PASS|FAIL)' "$SCRATCH/$name.out" | head -n 2 | tr '\n' ' ')
  [ -n "$verdict" ] || verdict=$(tail -n 1 "$SCRATCH/$name.out")
  ROWS+=("$(printf '%-21s %-6s %4ss  %s' "$name" "$rc" "$((SECONDS - start))" "${verdict:0:160}")")
  echo "${ROWS[-1]}"  # as it happens too, in case an outer timeout cuts the table
}
ROWS=()

{ date -u; command -v nvidia-smi >/dev/null && nvidia-smi -L; command -v nsys || echo "no nsys";
  $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, 'cuda', torch.cuda.is_available())"; } >> "$LOG" 2>&1

run capture-profile $PY skills/capture-profile/scripts/capture.py --out "$SCRATCH/profile" --config $CONFIG "${SETS[@]}"
run capture-check $PY skills/capture-profile/scripts/check.py "$SCRATCH/profile"
PROFILE="$SCRATCH/profile"
if ! grep -q '^PASS' "$SCRATCH/capture-check.out" && command -v nsys > /dev/null && [ "${CPU:-0}" != 1 ]; then
  # the Nsight path failed here: capture with torch.profiler too, so that a checked CSV still lands
  run capture-torch $PY skills/capture-profile/scripts/capture.py --tool torch --out "$SCRATCH/profile-torch" \
    --config $CONFIG "${SETS[@]}"
  run capture-torch-check $PY skills/capture-profile/scripts/check.py "$SCRATCH/profile-torch"
  PROFILE="$SCRATCH/profile-torch"
fi
[ -f "$PROFILE/kernels.csv" ] && cp "$PROFILE/kernels.csv" "$OUT/skills/kernels.csv" \
  && { echo "-- $PROFILE/kernels.csv (top 10)"; head -n 11 "$PROFILE/kernels.csv"; } >> "$LOG"

BASE="$SCRATCH/base"
mkdir -p "$BASE"
if [ -f .bench-head/head.tar ]; then
  tar -xf .bench-head/head.tar -C "$BASE" && echo "base: .bench-head/head.tar ($(cat .bench-head/commit 2>/dev/null))" >> "$LOG"
else
  cp -r pithtrain examples "$BASE"/ && echo "base: a copy of this tree (no .bench-head/head.tar): noise only" >> "$LOG"
fi
run validate-performance $PY skills/validate-performance/scripts/check.py --base-dir "$BASE" --work-dir . \
  --config $CONFIG --steps 12 --warmup-steps 4 --rounds 2 "${SETS[@]}"

run estimate-memory $PY skills/estimate-memory/scripts/check.py --config $CONFIG "${MEMORY_FORM[@]}" "${SETS[@]}"

rm -rf "$SCRATCH"
{ echo; printf '%-21s %-6s %5s  %s\n' skill exit time verdict; printf '%s\n' "${ROWS[@]}"; } | tee -a "$LOG"
