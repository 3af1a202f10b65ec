#!/usr/bin/env bash
# FAILs for: it is not the trained model
# Wrong: everything as the gold, but the Hugging Face export is then replaced by a freshly initialised model of the
# same config: TorchTitan's own seed checkpoint (`--checkpoint.create_seed_checkpoint`, step 0: the provided flavor as
# TorchTitan initialises it, with the run's seed, before any step) exported by the gold's export_hf.py into
# artifacts/hf-export. The gold's evaluate log, which named artifacts/hf-export, stays the newest. The seed run reads
# the corpus where the gold put it, as the gold's train.sh does (gpu1 provides no corpus/ for the job config's path).
set -euo pipefail
GOLD="$GOLD_DIR/../../gold/torchtitan"
GOLD_DIR="$GOLD" bash "$GOLD/solve.sh"
case "$ATE_PROFILE" in
  gpu1) config=gpu1.toml flavor=deepseek_v2_lite_4l seq_len=2048 ;;
  smoke) config=smoke.toml flavor=deepseek_v2_smoke seq_len=64
    export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/cpu_standin" TORCHTITAN_CPU_STANDIN=1 OMP_NUM_THREADS=1 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
python -m torch.distributed.run --standalone --nproc-per-node 1 -m torchtitan.train --job.config_file "$config" \
  --job.dump_folder artifacts/seed-run --checkpoint.enable --checkpoint.folder checkpoint \
  --checkpoint.create_seed_checkpoint --training.dataset_path artifacts/tokens
rm -rf artifacts/hf-export
python "$GOLD/export_hf.py" --checkpoint artifacts/seed-run/checkpoint/step-0 --flavor "$flavor" \
  --seq-len "$seq_len" --tokenizer data/tokenizer --output artifacts/hf-export
rm -rf artifacts/seed-run
