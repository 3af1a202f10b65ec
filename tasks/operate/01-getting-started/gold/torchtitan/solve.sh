#!/usr/bin/env bash
# Gold for Getting Started on torchtitan: a fresh .venv holding torchtitan and its requirements, then the provided train.sh,
# unmodified, under that venv's Python. Not run here (torchtitan 0.3.0 cannot start on a CPU; see task.toml).
set -euo pipefail
python3 -m venv .venv
case "$ATE_PROFILE" in
  smoke) .venv/bin/pip install -q --no-compile torch==2.13.0 ;;
  gpu1 | paper) .venv/bin/pip install -q torch==2.11.0 --index-url https://download.pytorch.org/whl/cu128 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
.venv/bin/pip install -q -e .
source .venv/bin/activate
bash train.sh
