#!/usr/bin/env bash
# Multi-node launch with torchrun's c10d rendezvous. Run this same command on every node:
#   NNODES=2 NPROC=8 MASTER_ADDR=node0.example MASTER_PORT=29500 bash examples/launch/multinode.sh CONFIG.toml [--set ...]
# The mesh is (PP, DP, CP, EP) outer to inner, so set EP x CP <= NPROC to keep the all-to-alls inside a node.
set -euo pipefail
exec python -m torch.distributed.run \
    --nnodes "${NNODES:-1}" --nproc-per-node "${NPROC:-8}" \
    --rdzv-backend c10d --rdzv-endpoint "${MASTER_ADDR:-localhost}:${MASTER_PORT:-29500}" --rdzv-id "${RUN_ID:-pithtrain}" \
    -m pithtrain train "$@"
