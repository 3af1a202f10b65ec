#!/usr/bin/env bash
# Gold for Report Heavy Kernels on torchtitan: TorchTitan's own profiler (job config [profiling]) over a 4-step run of
# the provided config, 3 warm-up steps and step 4 active; then top_kernels.py keeps its trace and writes the CSV.
# On smoke TorchTitan runs on the CPU through the provided cpu_standin/ (its sitecustomize.py says what it patches).
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) config=gpu1.toml ;;
  smoke) config=smoke.toml
    export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/cpu_standin" TORCHTITAN_CPU_STANDIN=1 OMP_NUM_THREADS=1 ;;
  paper) echo "not written for paper: the paper profiled 8 ranks with nsys" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
python -m torch.distributed.run --standalone --nproc-per-node 1 -m torchtitan.train --job.config_file "$config" \
  --training.steps 4 --profiling.enable_profiling --profiling.profile_freq 4 --profiling.profiler_warmup 3 \
  --profiling.profiler_active 1 --job.dump_folder artifacts/heavy-kernels/run
python "$GOLD_DIR/top_kernels.py" artifacts/heavy-kernels/run/profile_traces/iteration_4/rank0_trace.json
