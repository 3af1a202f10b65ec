#!/usr/bin/env bash
# Gold for Collect Routing Trace on pithtrain: convert the provided Hugging Face checkpoint, then a 4-step run of the
# provided routing.toml from it with the routers recorded (trace_routing.py).
set -euo pipefail
case "$ATE_PROFILE" in
  smoke | gpu1) LAUNCH=(python) ;;
  paper) echo "not written for paper: under PP4 x EP2 each rank routes part of the batch; trace_routing.py records one process" >&2
    exit 2 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
export PYTHONPATH="$PWD"  # the workspace's pithtrain, also for the script run from $GOLD_DIR
if [ "$ATE_PROFILE" = gpu1 ]; then python make_checkpoint.py; fi
python -m pithtrain convert hf-to-pithtrain --source checkpoint --output artifacts/init
"${LAUNCH[@]}" "$GOLD_DIR/trace_routing.py" routing.toml --set checkpoint.init_from=artifacts/init
