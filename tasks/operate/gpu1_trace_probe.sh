#!/usr/bin/env bash
# Diagnosis on one H200 (issue 28): operate-03's Megatron-LM gold, its console kept, run with a wrapper over the gold's
# routing_trace.py that also saves what step 1's forward saw (the token ids of its four micro-batches, and the first
# MoE router's input for micro-batch 0's first 64 positions); then the checker, then those against the checker's
# batch and transformers' hidden state, and the trace per (layer, sequence) against the recompute of every sequence.
#   OUT=... bash tasks/operate/gpu1_trace_probe.sh    (carry .whl/ as tasks/feature/gpu1_golds.sh's header says)
# Writes $OUT/trace-probe.log, $OUT/gold-tail.log and $OUT/probe-*.npy (a few MB).
set -u
OUT=${OUT:-/tmp/trace-probe}; mkdir -p "$OUT"; LOG="$OUT/trace-probe.log"
W=$(mktemp -d /tmp/tp.XXXX); REPO=$(pwd); T=tasks/operate/03-routing-trace
python3 -m venv --without-pip "$W/venv"
site=$("$W/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/host-packages.pth"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl
export PATH="$W/venv/bin:$PATH" ATE_MEGATRON_SOURCE="$REPO/.whl/megatron-lm-3bec9aa.tar.xz"
bash tasks/megatron_pin.sh seed
mkdir -p "$W/ws" && bash tasks/megatron_pin.sh unpack "$W/ws"
cp -rL $T/prepare/gpu1/megatron-lm/. "$W/ws/"
# The gold with its routing_trace.py wrapped (solve.sh copies GOLD_DIR's routing_trace.py into the workspace)
cp -r $T/gold/megatron-lm "$W/gold" && mv "$W/gold/routing_trace.py" "$W/gold/routing_trace_gold.py"
cat > "$W/gold/routing_trace.py" <<PY
import runpy, sys
import numpy as np
sys.path.insert(0, "$W/gold")
import routing_trace_gold  # its TopKRouter.forward recorder
from megatron.core.models.gpt import GPTModel
from megatron.core.transformer.moe.router import TopKRouter
tokens, inputs = [], []
model_forward, router_forward = GPTModel.forward, TopKRouter.forward
def saw_tokens(self, input_ids, *a, **k):
    if len(tokens) < 4:
        tokens.append(input_ids.detach().cpu().numpy())
        if len(tokens) == 4:
            np.save("artifacts/probe-step1-tokens.npy", np.concatenate(tokens))
    return model_forward(self, input_ids, *a, **k)
def saw_input(self, input, *a, **k):
    if not inputs:
        inputs.append(input.shape)
        np.save("artifacts/probe-router-input.npy", input[:64].detach().float().cpu().numpy())
    return router_forward(self, input, *a, **k)
GPTModel.forward, TopKRouter.forward = saw_tokens, saw_input
sys.argv = ["pretrain_gpt.py", *sys.argv[1:]]
runpy.run_path("pretrain_gpt.py", run_name="__main__")
PY
(cd "$W/ws" && git init -q && GOLD_DIR="$W/gold" ATE_PROFILE=gpu1 timeout 300 bash "$W/gold/solve.sh") > "$W/gold.log" 2>&1
echo "gold exit $?" >> "$LOG"
grep -aiE "load_return|loaded checkpoint|loading|missing|unexpected|iteration +1/|error|Traceback" "$W/gold.log" \
  | grep -v "UserWarning\|^  [a-z_]* \.\.\." | cut -c1-300 | head -40 >> "$LOG"
cp "$W/ws/artifacts/"probe-*.npy "$W/ws/artifacts/routing-traces/step-00000001.npz" "$OUT/" 2>>"$LOG"
python $T/check.py --workspace "$W/ws" --framework megatron-lm --answer /dev/null --profile gpu1 >> "$LOG" 2>&1
python tasks/operate/gpu1_trace_probe.py "$W/ws" >> "$LOG" 2>&1
grep -v "UserWarning\|warnings.warn" "$W/gold.log" | tail -c 6000 > "$OUT/gold-tail.log"
