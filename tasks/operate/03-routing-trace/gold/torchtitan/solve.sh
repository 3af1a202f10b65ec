#!/usr/bin/env bash
# Gold for Collect Routing Trace on torchtitan: the provided checkpoint's weights (written by make_checkpoint.py),
# loaded by TorchTitan itself from Hugging Face safetensors (checkpoint.initial_load_in_hf, its state-dict adapter),
# and a 4-step run with routing_trace.py as the custom import, which writes each step's routing.
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) ;;
  smoke) echo "not run on smoke: torchtitan 0.2.2 does not train on a CPU build of torch (task.toml)" >&2; exit 2 ;;
  paper) echo "not written for paper: 8 GPUs and downloads (task.toml)" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
python make_checkpoint.py
cp "$GOLD_DIR/routing_trace.py" routing_trace.py
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
python -m torch.distributed.run --standalone --nproc-per-node 1 -m torchtitan.train --job.config_file gpu1.toml \
  --training.steps 4 --experimental.custom_import routing_trace --job.dump_folder artifacts/routing-run \
  --checkpoint.enable --checkpoint.initial_load_path checkpoint --checkpoint.initial_load_in_hf --checkpoint.load_only
