#!/usr/bin/env bash
# The feature tasks' gpu1 cells on one H200, in one command from the repository root (python3 with torch, no network,
# no nox):
#   bash tasks/feature/gpu1_golds.sh LANE LANE      # a lane: "TASK... [--cases GLOB...]", e.g.
#   bash tasks/feature/gpu1_golds.sh "feature-01" "feature-02 --cases gold noop other-task blind-*"
# A lane may name operate tasks too ("operate-04 operate-03 --cases gold noop"): validate runs their gpu1 cells alike.
# Lanes past a command line's 2,000 characters (a call's op-check lanes): one a line in a file, then
#   mapfile -t L < results/ate/gpu1/lanes/FILE; bash tasks/feature/gpu1_golds.sh "${L[@]}"
# Runs `python3 -m ate_bench validate --frameworks $FRAMEWORK --profiles gpu1` once per lane, side by side (two 40 GB
# runs share the GPU; default lanes "feature-01 feature-03" and "feature-02 feature-04"), all inside BUDGET_S
# (default 540 s, under a 10-minute call). Each gold's checker trains six times, a near miss that passes the op
# check once more, and one that the seam does not catch six times; at about 15-20 s a run, the three blind
# near-miss sets make the four tasks over 100 runs, so split them into lanes of about 20 runs with --cases. Leaves
# files under $OUT: feature-gpu1/<stamp>.json (the lanes' records merged: cells, summary, the lanes in its
# command; "complete": false when a lane ran past BUDGET_S, with the cells it had decided), feature-gpu1.log
# (every console), feature-gpu1-progress.log (every 30 s) and feature-gpu1-runs.log (the end of every training run's
# log), and prints a table last; exit 1 on an unexpected cell or a lane that did not finish.
# The liveness measurement on this GPU is another call: tasks/feature/gpu1_liveness.sh.
# FRAMEWORK=megatron-lm: Megatron-LM at the pin through the harness's git mode, the commit carried as an archive
# (bash tasks/megatron_pin.sh pack) and put in the harness's cache, and the wheels of what it imports that the GPU
# image lacks: pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
# typing_extensions==4.16.0 (pip download as in tasks/operate/gpu1_golds.sh's header, into .whl/).
# FRAMEWORK=torchtitan (default pithtrain): TorchTitan 0.2.2, its workspace the sdist and its requirements wheels, both
# carried in .whl/ (tasks/operate/gpu1_golds.sh lists them): the sdist seeds the harness's cache, and the wheels go
# into a venv that sees the host's packages, whose Python runs validate, the checkers and the provided scripts.
# The harness makes pithtrain's workspaces with `git archive HEAD`: a tree that travelled without .git is committed
# in a copy first (PITH_GIT_COMMIT, if set, names the commit it came from; the record keeps it as travelled_commit).
# DRY=1 (any machine, no GPU needed): apply each gold to a copy of the tree, load feature-gpu1.toml with the gold's
# "enable" arguments and build the model on the meta device (parameter count), then run the validate plumbing, whose
# gpu1 cells come back "not run" on a machine without a GPU.
set -uo pipefail
OUT=${OUT:-/tmp/feature-gpu1-out}
BUDGET_S=${BUDGET_S:-540}
DRY=${DRY:-0}
PY=${PY:-python3}
FRAMEWORK=${FRAMEWORK:-pithtrain}
source_args=()
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/feature-gpu1"
scratch=$(mktemp -d /tmp/feature-gpu1.XXXXXX)
source "$(dirname "$0")/travelled_checkout.sh"

if [ "$FRAMEWORK" != pithtrain ]; then
  # A venv that sees the host's packages, with the carried wheels the framework needs on top; its python runs validate,
  # the checkers, the golds and the provided scripts (which call `python`, which the GPU image lacks).
  "$PY" -m venv --without-pip "$scratch/venv" || exit 1
  site=$("$scratch/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/host-packages.pth"
  # torchtitan's wheel too: the operate checkers recompute with the pinned torchtitan of their own environment, while
  # a run (from the workspace root) and a feature checker (the workspace first on sys.path) import the workspace's
  wheels=$(ls .whl/*.whl 2>/dev/null)
  [ -z "$wheels" ] || "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" $wheels || exit 1
  PY="$scratch/venv/bin/python"
  export PATH="$scratch/venv/bin:$PATH"
fi
if [ "$FRAMEWORK" = torchtitan ]; then
  cache="$HOME/.cache/pithtrain-ate/pypi"
  mkdir -p "$cache" && { [ -f "$cache/torchtitan-0.2.2.tar.gz" ] || cp .whl/torchtitan-0.2.2.tar.gz "$cache/"; } || exit 1
  source_args=(--source pypi)  # the carried sdist; no network to try git on
elif [ "$FRAMEWORK" = megatron-lm ]; then
  bash tasks/megatron_pin.sh seed || exit 1  # the pinned commit, from the carried archive into the harness's cache
  source_args=(--source git)
fi

if [ "$DRY" = 1 ] && [ "$FRAMEWORK" != pithtrain ]; then
  echo "DRY=1 builds pithtrain's golds only"; exit 2
elif [ "$DRY" = 1 ]; then
  status=0
  for task in tasks/feature/0*/; do
    ws="$scratch/dry-$(basename "$task")"
    mkdir -p "$ws" && git archive HEAD | tar -x -C "$ws" && cp "$task"prepare/gpu1/pithtrain/* "$ws"/
    (cd "$ws" && git init -q && GOLD_DIR="$repo/${task}gold/pithtrain" ATE_PROFILE=gpu1 \
      bash "$repo/${task}gold/pithtrain/solve.sh" && "$PY" - <<'PY') || { echo "DRY FAIL: $task"; status=1; }
import json

import torch

from pithtrain.models import model_family
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

enable = json.load(open("artifacts/feature.json"))["enable"]
cfg = load_pretrain_cfg("feature-gpu1.toml", [a for a in enable if a != "--set"])
with torch.device("meta"):
    model = model_family(cfg.model.family).model_class(cfg.model)
n = sum(p.numel() for p in model.parameters())
print(f"{' '.join(enable)}: {n / 1e9:.2f}B parameters, {16 * n / 2**30:.0f} GiB with fp32 weights, grads, AdamW")
PY
  done
  bash -n tasks/feature/provided/gpu1/pithtrain/verify.sh && bash -n tasks/feature/provided/gpu1/pithtrain/train.sh \
    || status=1
  [ "$status" = 0 ] && echo "DRY: every gold applies and its gpu1 config builds" || exit 1
else
  "$PY" -c 'import torch; assert torch.cuda.is_available(), "no GPU"' || { echo "python3 sees no GPU"; exit 1; }
  # The checkers run with the harness's minimal environment: see the GPU from there too, or stop before 6 minutes go.
  env -i PATH="$PATH" HOME="$scratch" "$PY" -c 'import torch; assert torch.cuda.is_available()' \
    || { echo "python3 sees no GPU in the checker's environment (PATH and HOME only)"; exit 1; }
fi

# Validate calls side by side, one per argument (a lane: task ids, then optionally --cases GLOB...), default the two
# halves feature-01/03 and feature-02/04. Globbing is off, so a lane's case globs reach validate as written.
lanes=("$@")
[ $# -eq 0 ] && lanes=("feature-01 feature-03" "feature-02 feature-04")
set -f
tags=()
lane_pids=()
for i in "${!lanes[@]}"; do
  tag="lane$i"
  tags+=("$tag")
  timeout -k 10 "$BUDGET_S" "$PY" -m ate_bench validate --tasks ${lanes[$i]} --frameworks "$FRAMEWORK" --profiles gpu1 "${source_args[@]}" \
    --out "$scratch/$tag" --work-root "$scratch/work-$tag" > "$scratch/$tag.log" 2>&1 &
  lane_pids+=($!)
done
# Progress while the lanes run (a gold's checker trains for minutes before its cell is decided): every 30 s, each
# run log written in the last minute with its last loss line, the GPU's memory in use and the scratch disk's free
# space, into $OUT/feature-gpu1-progress.log. The disk matters as much as the GPU: a pithtrain gpu1 run checks for
# room for a 25 GiB checkpoint before it starts, and Train & Evaluate's gold and fresh-export each hold checkpoints
# of that size, so on a 64 GB disk keep them out of the lanes beside each other and beside any other training case
# (on 2026-12-04 not-top3 ERRORed on "21.70 GiB free" next to both: results/ate/gpu1/README.md).
(while sleep 30; do
  echo "== $(date -u +%H:%M:%S) $(nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>/dev/null)," \
    "disk $(df -h --output=avail "$scratch" 2>/dev/null | tail -n 1 | tr -d ' ') free"
  find "$scratch" -path '*/work-lane*' -path '*/artifacts/*' -name '*.log' -mmin -1 2>/dev/null | while read -r log; do
    echo "${log#"$scratch"/} $(grep -aoE 'iteration +[0-9]+/ *[0-9]+|step[: ]+[0-9]+|lm loss: [^ ]+|loss[: ]+[^ ]+' \
      "$log" 2>/dev/null | tail -n 2 | tr '\n' ' ')"
  done
done >> "$OUT/feature-gpu1-progress.log" 2>&1) &
progress=$!
wait "${lane_pids[@]}"
kill "$progress" 2>/dev/null
set +f
for tag in "${tags[@]}"; do cat "$scratch/$tag.log"; done > "$OUT/feature-gpu1.log"
# the end of every run log the checkers left (a lane stopped at BUDGET_S leaves no record of why its runs were slow)
find "$scratch" -path '*/work-lane*' -path '*/artifacts/*' -name '*.log' 2>/dev/null | sort | while read -r log; do
  echo "==== ${log#"$scratch"/}"; tail -n 40 "$log" | cut -c1-400
done > "$OUT/feature-gpu1-runs.log"
export GPU1_LANES
GPU1_LANES=$(printf '"%s" ' "${lanes[@]}")

"$PY" - "$scratch" "$OUT/feature-gpu1" "${tags[@]}" <<'PY'
"""Merge the two validate records into one, then print the table."""

import json
import os
import sys
from pathlib import Path

scratch, out = Path(sys.argv[1]), Path(sys.argv[2])
records = []
for tag in sys.argv[3:]:
    found = sorted((scratch / tag).glob("*.json"))
    record = json.loads(found[0].read_text()) if found and found[0].stat().st_size else None
    if record:  # a lane killed at BUDGET_S leaves a record of the cells it decided, "complete": false
        records.append(record)
    if not record or not record.get("complete"):
        print(f"{tag}: {'a partial record' if record else 'no record'} (it ran past BUDGET_S or failed); its console:")
        print((scratch / f"{tag}.log").read_text()[-1500:])
if not records:
    sys.exit(1)
merged = dict(records[0])
merged["command"] = f"bash tasks/feature/gpu1_golds.sh {os.environ['GPU1_LANES'].strip()} (validate calls side by side, merged)"
merged["travelled_commit"] = os.environ.get("PITH_GIT_COMMIT", "")
merged["seconds"] = max(r["seconds"] for r in records)
merged["complete"] = len(records) == len(sys.argv[3:]) and all(r.get("complete") for r in records)
merged["tasks"] = {k: v for r in records for k, v in r["tasks"].items()}
merged["workspaces"] = {k: v for r in records for k, v in r["workspaces"].items()}
merged["cells"] = [c for r in records for c in r["cells"]]
cells = merged["cells"]
merged["summary"] = {
    "cells": len(cells),
    "as_expected": sum(c["verdict"] == c["expected"] for c in cells),
    "unexpected": sum(c["verdict"] not in (c["expected"], "not run") for c in cells),
    "not_run": sum(c["verdict"] == "not run" for c in cells),
}
path = out / f"{merged['date'].replace('-', '').replace(':', '').split('+')[0]}Z.json"
path.write_text(json.dumps(merged, indent=2) + "\n")
print(f"\n{'task':11} {'case':26} {'expected':8} {'verdict':8} {'s':>6}  reason")
for c in sorted(cells, key=lambda c: (c["task"], c["kind"] != "gold", c["case"])):
    why = (c["reasons"] or [""])[0][:70]
    print(f"{c['task']:11} {c['case']:26} {c['expected']:8} {c['verdict']:8} {c['seconds']:6.0f}  {why}")
s = merged["summary"]
print(f"{s['cells']} cells: {s['as_expected']} as expected, {s['unexpected']} unexpected, {s['not_run']} not run; "
      f"{merged['seconds']:.0f} s; record {path}")
sys.exit(1 if s["unexpected"] or not merged["complete"] else 0)
PY
status=$?
rm -rf "$scratch"
exit $status
