#!/usr/bin/env bash
# What the GPU machine holds for the other frameworks' gpu1 cells, and one framework's bare feature gpu1 run, in one
# short call from the repository root, carrying .whl/:
#   LR=1e-3 bash tasks/feature/gpu1_probe.sh       TorchTitan 0.2.2's verify.sh at a chosen lr (about 40 s; .whl/ as
#     tasks/feature/gpu1_golds.sh with FRAMEWORK=torchtitan): $OUT/env.txt and $OUT/torchtitan-verify.log
#   FRAMEWORK=megatron-lm bash tasks/feature/gpu1_probe.sh    Megatron-LM 3bec9aa's verify.sh (pretrain_gpt.py, 4
#     iterations; .whl/megatron-lm-3bec9aa.tar.xz from bash tasks/megatron_pin.sh pack), stopped with its whole
#     process group after TIMEOUT_S (default 240): $OUT/env.txt and $OUT/megatron-lm-verify.log, written as it runs
# env.txt: the compilers Megatron-LM's dataset helpers need, and which of Megatron-LM's optional requirements import.
set -uo pipefail
OUT=${OUT:-/tmp/gpu1-probe}
LR=${LR:-3e-4}
FRAMEWORK=${FRAMEWORK:-torchtitan}
TIMEOUT_S=${TIMEOUT_S:-240}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
mkdir -p "$OUT"
{
  which g++ gcc make python3-config c++ nvcc
  python3 -c 'import sys; print(sys.version)'
  for m in transformers einops tensorboard pybind11 apex transformer_engine sentencepiece tiktoken flask wandb \
    nvidia_resiliency_ext tensorstore zarr; do
    python3 -c "import $m; print('$m', getattr($m, '__version__', '?'))" 2>&1 | tail -n 1
  done
} > "$OUT/env.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/probe-site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/probe-site  # the carried requirements (tasks/feature/gpu1_golds.sh's header lists them)
ws=$(mktemp -d /tmp/probe-ws.XXXX)
log="$OUT/$FRAMEWORK-verify.log"
if [ "$FRAMEWORK" = megatron-lm ]; then
  bash tasks/megatron_pin.sh unpack "$ws" || exit 1
  cp -rL tasks/feature/provided/gpu1/megatron-lm/. "$ws/"
  (cd "$ws" && timeout -k 10 "$TIMEOUT_S" bash verify.sh) > "$log" 2>&1
  rc=$?
else
  tar -xzf .whl/torchtitan-0.2.2.tar.gz -C "$ws" --strip-components 1 && cp -rL tasks/feature/provided/gpu1/torchtitan/. "$ws/"
  (cd "$ws" && timeout -k 10 "$TIMEOUT_S" bash verify.sh --optimizer.lr "$LR") > "$log" 2>&1
  rc=$?
fi
echo "$FRAMEWORK verify.sh exit $rc after $SECONDS s" | tee -a "$log"
cat "$OUT/env.txt"; grep -E "step:|iteration +[0-9]+/" "$log"
exit $rc
