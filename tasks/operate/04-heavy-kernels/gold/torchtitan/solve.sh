#!/usr/bin/env bash
# Gold for Report Heavy Kernels on torchtitan: TorchTitan's own profiler (job config [profiling]) over a 4-step run of
# the provided config, 3 warm-up steps and step 4 active; then top_kernels.py keeps its trace and writes the CSV.
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) ;;
  smoke) echo "not run on smoke: torchtitan 0.2.2 does not train on a CPU build of torch (task.toml)" >&2; exit 2 ;;
  paper) echo "not written for paper: the paper profiled 8 ranks with nsys" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
python -m torch.distributed.run --standalone --nproc-per-node 1 -m torchtitan.train --job.config_file gpu1.toml \
  --training.steps 4 --profiling.enable_profiling --profiling.profile_freq 4 --profiling.profiler_warmup 3 \
  --profiling.profiler_active 1 --job.dump_folder artifacts/heavy-kernels/run
python "$GOLD_DIR/top_kernels.py" artifacts/heavy-kernels/run/profile_traces/iteration_4/rank0_trace.json
