#!/usr/bin/env bash
# Gold for Getting Started on pithtrain: a fresh .venv holding pithtrain and its requirements, then the provided
# train.sh, unmodified, under that venv's Python.
set -euo pipefail
case "$ATE_PROFILE" in
  smoke)  # torch's CPU build from this machine's package index; --no-compile skips byte-compiling torch (speed)
    python3 -m venv .venv
    .venv/bin/pip install -q --no-compile torch==2.13.0 -e . ;;
  gpu1)  # the GPU machine reaches no package index: the venv sees the host's CUDA torch, numpy, safetensors and
    # tokenizers through a .pth file, and `python -m pithtrain` runs from the workspace root's source tree
    python3 -m venv --without-pip .venv
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    # every directory on python3's path (a .pth line is not read again for .pth files of its own, so the host's
    # purelib alone misses the packages of a python3 that is a venv's)
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
