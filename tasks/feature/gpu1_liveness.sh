#!/usr/bin/env bash
# Liveness of the feature golds on one H200 (issue 26), in one command from the repository root (python3 with torch,
# no network):
#   bash tasks/feature/gpu1_liveness.sh [TASK ...]     # e.g. 01-moba 04-moe-plus-plus; default all four
# For each gold, two at a time side by side (two 40 GB runs share the GPU): one run with the feature on (its seam
# judged), five base runs and three off runs of verify.sh (gpu1 profile); every choice of three base runs and one
# off run is judged as the checker does, C(5,3) x 3 = 30 verdicts a task (tasks/feature/measure_false_fail.py
# --pool 5 3), each pair inside BUDGET_S (default 240 s). Leaves
# $OUT/feature-gpu1-liveness.log and prints each task's line (verdicts, FAILs, every base-path gap) last; exit 1 when
# a verdict FAILs or a task gives no line. A tree that travelled without .git is committed in a copy first, as
# gpu1_golds.sh does (the gold workspaces are made with `git archive HEAD`).
set -uo pipefail
OUT=${OUT:-/tmp/feature-gpu1-out}
BUDGET_S=${BUDGET_S:-240}
PY=${PY:-python3}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
scratch=$(mktemp -d /tmp/feature-gpu1-liveness.XXXXXX)
source "$(dirname "$0")/travelled_checkout.sh"
"$PY" -c 'import torch; assert torch.cuda.is_available(), "no GPU"' || { echo "python3 sees no GPU"; exit 1; }

tasks=("$@")
[ $# -eq 0 ] && tasks=(01-moba 02-dynmoe 03-diff-attention 04-moe-plus-plus)
for ((i = 0; i < ${#tasks[@]}; i += 2)); do
  for task in "${tasks[@]:i:2}"; do
    timeout -k 10 "$BUDGET_S" "$PY" tasks/feature/measure_false_fail.py --tasks "$task" --op-checks 0 --pool 5 3 \
      --profile gpu1 > "$scratch/$task.log" 2>&1 &
  done
  wait
done
status=0
for task in "${tasks[@]}"; do
  cat "$scratch/$task.log" >> "$OUT/feature-gpu1-liveness.log"
  grep -q " pool: seam PASS; 30 liveness verdicts .* 0 FAIL" "$scratch/$task.log" || status=1
  grep " pool: " "$scratch/$task.log" || { echo "$task: no result"; tail -n 5 "$scratch/$task.log"; status=1; }
done
rm -rf "$scratch"
exit $status
