#!/usr/bin/env bash
# FAILs for: shows no loss for step
# Near miss only on gpu1: Megatron-LM runs only there (task.toml marks its smoke and paper golds unrunnable)
# Wrong: train.sh is edited to stop after 2 steps (its `--train-iters 5` becomes 2); all else is the gold's: the same
# gpu1 .venv (the host's CUDA torch and Megatron-LM's requirements through a .pth file) and the edited train.sh run
# under it, so the log has its python-prefix, torch-file and exit-time lines. The check must fail on the edit alone.
set -euo pipefail
case "$ATE_PROFILE" in
  gpu1) ;;
  smoke) echo "not run on smoke: megatron-core's MoE step needs CUDA (task.toml)" >&2; exit 2 ;;
  paper) echo "not written for paper: 8 GPUs and downloads (task.toml)" >&2; exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
sed -i 's/--train-iters 5 /--train-iters 2 /' train.sh
grep -q -- '--train-iters 2 ' train.sh
GOLD_DIR="$GOLD_DIR/../../gold/megatron-lm" bash "$GOLD_DIR/../../gold/megatron-lm/solve.sh"
