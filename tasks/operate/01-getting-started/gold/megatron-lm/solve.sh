#!/usr/bin/env bash
# Gold for Getting Started on megatron-lm: a .venv that runs Megatron-LM (the workspace's git tree at the pin: the
# provided train.sh launches its pretrain_gpt.py, which imports the tree's megatron package from the workspace root) and
# its requirements, then the provided train.sh, unmodified, under that venv's Python. Only gpu1 has a written run
# (task.toml says why not smoke).
set -euo pipefail
case "$ATE_PROFILE" in
  smoke)  # torch's CPU build from this machine's package index, then megatron-core and its requirements
    python3 -m venv .venv
    .venv/bin/pip install -q --no-compile torch==2.13.0
    .venv/bin/pip install -q -e . ;;
  gpu1)  # the GPU machine reaches no package index: the venv sees the host's CUDA torch and the packages Megatron-LM
    # imports there (transformers, numpy, pyyaml, regex, six, pybind11 for its dataset helpers) through a .pth file,
    # with anything carried on PYTHONPATH; megatron itself is the workspace's tree, not an installed copy
    python3 -m venv --without-pip .venv
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    # every directory on python3's path: PYTHONPATH's, and those that .pth files add (a .pth line is not read again
    # for .pth files of its own, so the host's purelib alone can miss a venv's host packages)
    python3 -c 'import os, sys; print("\n".join(p for p in sys.path if p and os.path.isdir(p)))' \
      >"$site/host-packages.pth" ;;
  paper)  # the paper's machines: CUDA 12.8 wheels from PyTorch's index
    python3 -m venv .venv
    .venv/bin/pip install -q torch==2.11.0 --index-url https://download.pytorch.org/whl/cu128
    .venv/bin/pip install -q -e . ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
source .venv/bin/activate
bash train.sh
