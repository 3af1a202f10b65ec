#!/usr/bin/env bash
# Gold for Collect Routing Trace on torchtitan: the provided checkpoint's weights (written by make_checkpoint.py),
# loaded by TorchTitan itself from Hugging Face safetensors (checkpoint.initial_load_in_hf, its state-dict adapter),
# and a 4-step run with routing_trace.py as the custom import, which writes each step's routing. On smoke the checkpoint
# is provided and TorchTitan runs on the CPU through the provided cpu_standin/ (its sitecustomize.py says what it
# patches).
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) config=gpu1.toml flavor=deepseek_v2_lite_4l
    python make_checkpoint.py ;;
  smoke) config=smoke.toml flavor=deepseek_v2_smoke
    export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/cpu_standin" TORCHTITAN_CPU_STANDIN=1 OMP_NUM_THREADS=1 ;;
  paper) echo "not written for paper: 8 GPUs and downloads (task.toml)" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
cp "$GOLD_DIR/routing_trace.py" routing_trace.py
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 ROUTING_TRACE_FLAVOR="$flavor"
python -m torch.distributed.run --standalone --nproc-per-node 1 -m torchtitan.train --job.config_file "$config" \
  --training.steps 4 --experimental.custom_import routing_trace --job.dump_folder artifacts/routing-run \
  --checkpoint.enable --checkpoint.initial_load_path checkpoint --checkpoint.initial_load_in_hf --checkpoint.load_only
