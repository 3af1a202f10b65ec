#!/usr/bin/env bash
# Gold for Report Heavy Kernels on pithtrain: profile step 4 of the provided run with torch.profiler (profile_step.py).
set -euo pipefail
case "$ATE_PROFILE" in
  smoke | gpu1) ;;
  paper) echo "not written for paper: the paper profiled 8 ranks with nsys; profile_step.py runs one process" >&2
    exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
export PYTHONPATH="$PWD"  # the workspace's pithtrain, for the script run from $GOLD_DIR
python "$GOLD_DIR/profile_step.py" profile.toml
