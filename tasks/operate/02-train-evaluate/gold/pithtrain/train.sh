#!/usr/bin/env bash
# Train & Evaluate on pithtrain: 25 steps from random initialisation with the provided operate.toml (the profile's
# shape, batch and mesh) on the tokenized corpus; the final checkpoint goes to artifacts/checkpoint.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p artifacts
LOG="artifacts/train-$(date +%Y%m%d-%H%M%S).log"
finish() { status=$?; trap - EXIT INT TERM; echo "exit-time: $(date +%s)" >>"$LOG"; exit "$status"; }
trap finish EXIT INT TERM
{
  if [ "${NPROC:-1}" -gt 1 ]; then LAUNCH=(torchrun --standalone --nproc-per-node "$NPROC"); else LAUNCH=(python); fi
  "${LAUNCH[@]}" -m pithtrain train operate.toml --set checkpoint.dir=artifacts/checkpoint
} 2>&1 | tee -a "$LOG"
