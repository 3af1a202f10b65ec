#!/usr/bin/env bash
# The operate tasks' gold solutions on one framework (FRAMEWORK: pithtrain, the default, torchtitan or megatron-lm),
# gpu1 profile (one H200), each proven by its checker: the one GPU call that validates them. From the repository root on
# the GPU machine:
#   bash tasks/operate/gpu1_golds.sh            (about 5 minutes; writes $OUT/gpu1_golds.json and $OUT/gpu1_golds.log)
#   TASKS=02-train-evaluate BUDGET_S=500 bash tasks/operate/gpu1_golds.sh     (one task, a longer budget)
#   FRAMEWORK=torchtitan bash tasks/operate/gpu1_golds.sh    (TorchTitan 0.2.2: its workspace is the sdist, carried
#     as .whl/torchtitan-0.2.2.tar.gz, and its requirements are the carried wheels gpu_run.sh puts on PYTHONPATH;
#     through gpu_run.sh: ATE_TORCHTITAN=1 ATE_BUDGET_S=540 TESTS=0 PROBE=0 CONVERGENCE=0 CONFIGS= bash benchmarks/gpu_run.sh)
# .whl/ for torchtitan (2 MiB): cp ~/.cache/pithtrain-ate/pypi/torchtitan-0.2.2.tar.gz .whl/ (python -m ate_bench
# caches it there), then the device README's `pip download --no-deps --only-binary=:all: --python-version 3.12 ...
# -d .whl` of torchtitan==0.2.2 torchdata==0.11.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 tyro==1.0.17
# docstring_parser==0.18.0 typeguard==4.6.1 shtab==1.13.0; the GPU image has the rest (pyarrow, transformers, ...).
#   FRAMEWORK=megatron-lm bash tasks/operate/gpu1_golds.sh   (Megatron-LM at the pin 3bec9aa: its workspace is the
#     pinned tree less what no run needs, carried as .whl/megatron-lm-3bec9aa.tar.xz: bash tasks/megatron_pin.sh pack;
#     nothing is installed: pretrain_gpt.py imports megatron from the workspace root, and the GPU image must have what
#     it imports (transformers, numpy, pyyaml, regex, six; pybind11, g++ and python3-config for its dataset helpers).)
# The 4-layer model's checkpoint with optimizer state is 27 GB: Getting Started and Train & Evaluate each write one,
# so the disk's speed sets most of the time; the tasks run cheapest first, Train & Evaluate last.
# Each task gets a fresh workspace as the harness makes one (pithtrain: this tree without ate_bench/, tasks/, tests/,
# results/; torchtitan: the unpacked sdist; megatron-lm: the unpacked archive), the task's prepare/gpu1/$FRAMEWORK/
# files, then its gold (ATE_PROFILE=gpu1) and check.py; the
# untouched workspace (noop) must FAIL. The wrong cases are left to `python -m ate_bench validate`: two of them
# re-run a gold, which the call's time does not allow. A gold is stopped when the call's budget runs out.
set -uo pipefail
REPO=$(pwd)
OUT=${OUT:-$REPO/results/ate/validation}
BUDGET_S=${BUDGET_S:-330}
FRAMEWORK=${FRAMEWORK:-pithtrain}
SDIST=${SDIST:-$REPO/.whl/torchtitan-0.2.2.tar.gz}
MEGATRON_COMMIT=3bec9aa
MEGATRON_ARCHIVE=${MEGATRON_ARCHIVE:-$REPO/.whl/megatron-lm-$MEGATRON_COMMIT.tar.xz}
export ATE_MEGATRON_SOURCE=${ATE_MEGATRON_SOURCE:-$MEGATRON_ARCHIVE}  # the checkers read the pin from it, never the workspace
mkdir -p "$OUT"
LOG="$OUT/gpu1_golds.log"
ROWS=$(mktemp)
WORK=$(mktemp -d /tmp/gpu1-golds.XXXX)
START=$(date +%s)
# gpu_run.sh may run these beside the feature tasks' trainers on the same GPU: grow allocations in place
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
if [ "$FRAMEWORK" = megatron-lm ] && ls "$REPO"/.whl/*.whl >/dev/null 2>&1; then  # what Megatron-LM imports that
  # the GPU image lacks (tasks/feature/gpu1_golds.sh's header lists the wheels), on PYTHONPATH: the golds' venvs read
  # it into their .pth, and the checkers and provided scripts inherit it
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" "$REPO"/.whl/*.whl || exit 1
  export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! command -v python >/dev/null; then  # the GPU image has python3 only; the golds call `python`: a venv's (a link
  # to python3 would lose the image's packages when python3 is itself a venv's), seeing the host's packages
  python3 -m venv --without-pip "$WORK/venv" || exit 1
  site=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/host-packages.pth"
  export PATH="$WORK/venv/bin:$PATH"
fi
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)'; } >>"$LOG" 2>&1

workspace() {  # $1: task dir -> a fresh workspace path on stdout
  local ws
  ws=$(mktemp -d "$WORK/ws.XXXX")
  if [ "$FRAMEWORK" = torchtitan ]; then
    tar -xzf "$SDIST" -C "$ws" --strip-components 1
  elif [ "$FRAMEWORK" = megatron-lm ]; then
    (cd "$REPO" && bash tasks/megatron_pin.sh unpack "$ws")
  else
    tar -C "$REPO" --exclude=./.git --exclude=./ate_bench --exclude=./tasks --exclude=./tests --exclude=./results \
      --exclude=./.nox --exclude=./.venv --exclude=./.whl -cf - . | tar -xf - -C "$ws"
  fi
  cp -rL "$1/prepare/gpu1/$FRAMEWORK/." "$ws/"
  echo "$ws"
}

check() {  # $1 task dir, $2 workspace, $3 case, $4 expected, $5 seconds the case ran -> one row
  local out rc
  out=$(cd "$2" && python3 "$1/check.py" --workspace "$2" --framework "$FRAMEWORK" --answer /dev/null --profile gpu1 \
    2>>"$LOG")
  rc=$?
  echo "$out" | sed "s|^|[$(basename "$1") $3 check] |" >>"$LOG"
  python3 - "$(basename "$1")" "$3" "$4" "$rc" "$5" "$out" "$FRAMEWORK" >>"$ROWS" <<'PY'
import json, sys
task, case, expected, rc, seconds, out, framework = sys.argv[1:]
verdict = "PASS" if rc == "0" and "PASS" in out.splitlines() else "FAIL" if rc in ("0", "1") else "ERROR"
reasons = [l[len("FAIL: "):] for l in out.splitlines() if l.startswith("FAIL: ")]
print(json.dumps({"task": task, "framework": framework, "profile": "gpu1", "case": case, "expected": expected,
                  "verdict": verdict, "reasons": reasons, "seconds": float(seconds)}))
PY
}

TASKS=${TASKS:-"04-heavy-kernels 03-routing-trace 01-getting-started 02-train-evaluate"}  # cheapest first
[ "$FRAMEWORK" = torchtitan ] && [ ! -f "$SDIST" ] && { echo "no TorchTitan sdist at $SDIST (carry it in .whl/)" >>"$LOG"; exit 2; }
[ "$FRAMEWORK" = megatron-lm ] && [ ! -f "$MEGATRON_ARCHIVE" ] \
  && { echo "no Megatron-LM archive at $MEGATRON_ARCHIVE (carry it in .whl/; see the header)" >>"$LOG"; exit 2; }
for slug in $TASKS; do
  task="$REPO/tasks/operate/$slug"
  ws=$(workspace "$task")
  check "$task" "$ws" noop FAIL 0
  rm -rf "$ws"
  left=$((BUDGET_S - ($(date +%s) - START)))
  ws=$(workspace "$task")
  t0=$(date +%s)
  echo "=== $(basename "$task") gold (budget left ${left}s)" >>"$LOG"
  (cd "$ws" && ATE_PROFILE=gpu1 GOLD_DIR="$task/gold/$FRAMEWORK" timeout -k 10 "$((left > 20 ? left : 20))" \
    bash "$task/gold/$FRAMEWORK/solve.sh") >>"$LOG" 2>&1
  rc=$?  # before the echo's own command substitutions reset $?
  echo "=== $slug gold exit $rc after $(($(date +%s) - t0))s" >>"$LOG"
  check "$task" "$ws" gold PASS "$(($(date +%s) - t0))"
  rm -rf "$ws"
done

case "$FRAMEWORK" in
  torchtitan) SOURCE=$(basename "$SDIST") ;;
  megatron-lm)  # the record names the archive, the commit it was made from and the paths it holds
    SOURCE=$(python3 -c 'import json, sys; a, c, p = sys.argv[1:]; print(json.dumps(
      {"archive": a, "repository": "NVIDIA/Megatron-LM", "commit": c, "left_out": p.split()}))' \
      "$(basename "$MEGATRON_ARCHIVE")" "$(python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$MEGATRON_ARCHIVE" | git get-tar-commit-id)" \
      "$(cat "${MEGATRON_ARCHIVE%.tar.xz}.left-out" 2>/dev/null)") ;;
  *) SOURCE="this tree" ;;
esac
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
python3 - "$ROWS" "$OUT/gpu1_golds.json" "${PITH_GIT_COMMIT:-$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)}" \
  "$FRAMEWORK" "$SOURCE" "${GPU:-unknown}" <<'PY'
import json, platform, sys, time
import torch
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
source = json.loads(sys.argv[5]) if sys.argv[5].startswith("{") else sys.argv[5]  # megatron-lm: archive, commit, paths
record = {"schema": "operate-gpu1-golds-1", "commit": sys.argv[3], "host": platform.node(),
          "framework": sys.argv[4], "framework_source": source, "gpu": sys.argv[6], "torch": torch.__version__,
          "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cells": rows,
          "all_as_expected": all(r["verdict"] == r["expected"] for r in rows)}
open(sys.argv[2], "w").write(json.dumps(record, indent=1) + "\n")
for r in rows:
    print(f"{r['task']:22} {r['case']:5} {r['verdict']:5} (expected {r['expected']}) {r['seconds']:.0f}s {r['reasons'][:2]}")
print("all as expected" if record["all_as_expected"] else "NOT all as expected")
PY
rm -rf "$WORK" "$ROWS"
