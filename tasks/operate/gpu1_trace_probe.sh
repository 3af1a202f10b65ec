#!/usr/bin/env bash
# Diagnosis (one H200): operate-03's Megatron-LM gold with its console kept, the checker, then its step-1 trace per
# (layer, sequence) against the recompute of every sequence, and shifted by one token. Writes $OUT/trace-probe.log.
set -u
OUT=${OUT:-/tmp/trace-probe}; mkdir -p "$OUT"; LOG="$OUT/trace-probe.log"
W=$(mktemp -d /tmp/tp.XXXX); REPO=$(pwd)
python3 -m venv --without-pip "$W/venv"
site=$("$W/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/host-packages.pth"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl
export PATH="$W/venv/bin:$PATH"
bash tasks/megatron_pin.sh seed
mkdir -p "$W/ws" && bash tasks/megatron_pin.sh unpack "$W/ws"
T=tasks/operate/03-routing-trace
cp -rL $T/prepare/gpu1/megatron-lm/. "$W/ws/"
export ATE_MEGATRON_SOURCE="$REPO/.whl/megatron-lm-3bec9aa.tar.xz"
(cd "$W/ws" && git init -q && GOLD_DIR="$REPO/$T/gold/megatron-lm" ATE_PROFILE=gpu1 timeout 300 bash "$REPO/$T/gold/megatron-lm/solve.sh") > "$W/gold.log" 2>&1
echo "gold exit $?" >> "$LOG"
grep -aiE "load|checkpoint|iteration +1/|lm loss|error|Traceback|rerun|warning" "$W/gold.log" | grep -v UserWarning | cut -c1-300 | head -60 >> "$LOG"
python $T/check.py --workspace "$W/ws" --framework megatron-lm --answer /dev/null --profile gpu1 >> "$LOG" 2>&1
python - "$W/ws" >> "$LOG" 2>&1 <<'PY'
import sys
from pathlib import Path
import numpy as np
sys.path[:0] = ["tasks/operate/03-routing-trace", "tasks/operate"]
import check, operate_check as oc
task, ws = Path("tasks/operate/03-routing-trace").resolve(), Path(sys.argv[1])
with np.load(ws / "artifacts/routing-traces/step-00000001.npz") as f:
    got = np.sort(f["expert_ids"], -1)
b = check.megatron_step1_batches(task, "gpu1", oc.provided(task, "gpu1", "megatron-lm", "data"))["with --append-eod"]
print("batch", b.shape, "first tokens", b[:, :6].tolist())
logits = check.hf_first_moe_router(oc.provided(task, "gpu1", "pithtrain", "checkpoint"), ws / "checkpoint", b)
want = np.sort(np.argsort(-logits, -1)[..., :6], -1)
for layer in range(got.shape[0]):
    m = np.array([[(got[layer, i] == want[j]).all(-1).mean() for j in range(8)] for i in range(8)])
    print(f"layer {layer}: trace seq i vs recompute seq j (agreement), max {m.max():.3f}\n{np.round(m, 2)}")
for shift in (-1, 1):
    g, w = (got[0, :, 1:], want[:, :-1]) if shift == 1 else (got[0, :, :-1], want[:, 1:])
    print(f"shift {shift}: {(g == w).all(-1).mean():.3f}")
print("per-expert counts trace", np.bincount(got[0].ravel(), minlength=64)[:16], "recompute", np.bincount(want.ravel(), minlength=64)[:16])
PY
tail -c 4000 "$W/gold.log" > "$OUT/gold-tail.log"
