#!/usr/bin/env bash
# What the GPU machine holds for the other frameworks' gpu1 cells, and TorchTitan's base gpu1 run at a chosen lr, in
# one short call from the repository root, carrying .whl/ (TorchTitan's sdist and requirements' wheels, as
# tasks/feature/gpu1_golds.sh with FRAMEWORK=torchtitan):
#   LR=1e-3 bash tasks/feature/gpu1_probe.sh        (about 40 s; $OUT/env.txt and $OUT/torchtitan-verify.log)
# env.txt: the compilers Megatron-LM's dataset helpers need, and which of Megatron-LM's optional requirements import.
set -uo pipefail
OUT=${OUT:-/tmp/gpu1-probe}
LR=${LR:-3e-4}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/probe-site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/probe-site
{
  which g++ gcc make python3-config c++
  python3 -c 'import sys; print(sys.version)'
  for m in transformers einops tensorboard pybind11 apex transformer_engine sentencepiece tiktoken flask wandb \
    nvidia_resiliency_ext tensorstore zarr; do
    python3 -c "import $m; print('$m', getattr($m, '__version__', '?'))" 2>&1 | tail -n 1
  done
} > "$OUT/env.txt" 2>&1
ws=$(mktemp -d /tmp/probe-ws.XXXX)
tar -xzf .whl/torchtitan-0.2.2.tar.gz -C "$ws" --strip-components 1 && cp -rL tasks/feature/provided/gpu1/torchtitan/. "$ws/"
(cd "$ws" && timeout -k 10 200 bash verify.sh --optimizer.lr "$LR") > "$OUT/torchtitan-verify.log" 2>&1
echo "verify.sh --optimizer.lr $LR exit $?" | tee -a "$OUT/torchtitan-verify.log"
cat "$OUT/env.txt"; grep "step:" "$OUT/torchtitan-verify.log"
