"""Gold for Collect Routing Trace on torchtitan: read through `--experimental.custom_import routing_trace`, it
registers the provided flavor and records the routing of every MoE layer's router during training.

TorchTitan imports this module in Trainer.__init__, before it builds the model. Each training forward calls the
MoE layers in model order, once per step (one micro-batch: no gradient accumulation, no activation recompute in
the provided config); when all of them have routed, the step's routing goes to
artifacts/routing-traces/step-XXXXXXXX.npz: expert_ids int32 and gate_weights float32 (renormalised over the
token's top_k) of shape (MoE layers, batch, sequence, top_k). The provided flavor module is named by
ROUTING_TRACE_FLAVOR (solve.sh sets it per profile; deepseek_v2_lite_4l, gpu1's, when unset).
"""

import importlib
import os
from pathlib import Path

import numpy as np
import torch
from torchtitan.models.deepseek_v3 import deepseekv3_args
from torchtitan.models.moe.moe import MoE, TokenChoiceTopKRouter

OUT = Path("artifacts/routing-traces")
FLAVOR_NAME = os.environ.get("ROUTING_TRACE_FLAVOR", "deepseek_v2_lite_4l")
importlib.import_module(FLAVOR_NAME)  # registers the provided flavor, as the config's own custom import did
FLAVOR = deepseekv3_args[FLAVOR_NAME]
N_MOE = FLAVOR.n_layers - FLAVOR.n_dense_layers
routed: list[tuple[torch.Tensor, torch.Tensor]] = []  # this step's (ids (B, S, K), weights (B, S, K)), layer order
steps_written = [0]
router_forward, moe_forward = TokenChoiceTopKRouter.forward, MoE.forward


def recorded_router_forward(self, x, expert_bias=None):
    top_scores, ids, counts = router_forward(self, x, expert_bias)
    w = top_scores.detach().float()
    routed.append((ids.detach().to(torch.int32), w / w.sum(-1, keepdim=True)))
    return top_scores, ids, counts


def recorded_moe_forward(self, x):
    out = moe_forward(self, x)
    bs, slen = x.shape[:2]
    ids, w = routed[-1]
    routed[-1] = (ids.view(bs, slen, -1), w.view(bs, slen, -1))
    if len(routed) == N_MOE:
        steps_written[0] += 1
        OUT.mkdir(parents=True, exist_ok=True)
        np.savez(
            OUT / f"step-{steps_written[0]:08d}.npz",
            expert_ids=torch.stack([r[0] for r in routed]).cpu().numpy(),
            gate_weights=torch.stack([r[1] for r in routed]).cpu().numpy(),
        )
        routed.clear()
    return out


TokenChoiceTopKRouter.forward = recorded_router_forward
MoE.forward = recorded_moe_forward
