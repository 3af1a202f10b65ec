"""Gold for Collect Routing Trace on megatron-lm: pretrain_gpt.py run with every MoE layer's router recorded, launched
in its place with the same arguments:

    python -m torch.distributed.run --standalone --nproc-per-node 1 routing_trace.py <pretrain_gpt.py's arguments>

It wraps TopKRouter.forward (Megatron-Core's router: it returns the token's probabilities over all experts, zero off its
top-k, and the routing map) and then runs pretrain_gpt.py as __main__. A training step runs its micro-batches in the
data loader's order, each through the MoE layers in model order (no activation recompute, no evaluation in the gold's
run), so a step is (MoE layers x micro-batches) router calls; after the last of them the step's routing goes to
artifacts/routing-traces/step-XXXXXXXX.npz: expert_ids int32 and gate_weights float32 (renormalised over the token's
top_k) of shape (MoE layers, global batch, sequence, top_k). Megatron's hidden states are [sequence, batch, hidden], so
the router's tokens are sequence-major. One rank, no data parallelism: the global batch is this rank's micro-batches.
"""

import runpy
import sys
from pathlib import Path

import numpy as np
import torch
from megatron.core.transformer.moe.router import TopKRouter

OUT = Path("artifacts/routing-traces")
routed: list[tuple[torch.Tensor, torch.Tensor]] = []  # this step's (ids (b, s, K), weights (b, s, K)), in call order
steps_written = [0]
router_forward = TopKRouter.forward


def layout() -> tuple[int, int]:
    """(MoE layers, micro-batches per step) of this run."""
    from megatron.training import get_args

    args = get_args()
    if args.world_size != 1 or args.recompute_granularity is not None:
        raise SystemExit("routing_trace.py records one rank without activation recompute")
    return sum(args.moe_layer_freq), args.global_batch_size // args.micro_batch_size


def recorded_router_forward(self, input, *args, **kwargs):
    probs, routing_map = router_forward(self, input, *args, **kwargs)
    seq, batch = input.shape[:2]
    k = self.topk
    ids = routing_map.float().topk(k, dim=-1).indices  # the k experts each token was sent to
    w = probs.detach().float().gather(-1, ids)
    ids, w = (t.view(seq, batch, k).transpose(0, 1) for t in (ids, w / w.sum(-1, keepdim=True)))
    routed.append((ids.to(torch.int32).cpu(), w.cpu()))
    n_moe, n_micro = layout()
    if len(routed) == n_moe * n_micro:
        # call m * n_moe + layer is micro-batch m's MoE layer `layer`: per layer, the micro-batches end to end
        layers = [[routed[m * n_moe + layer] for m in range(n_micro)] for layer in range(n_moe)]
        steps_written[0] += 1
        OUT.mkdir(parents=True, exist_ok=True)
        np.savez(
            OUT / f"step-{steps_written[0]:08d}.npz",
            expert_ids=torch.stack([torch.cat([ids for ids, _ in calls]) for calls in layers]).numpy(),
            gate_weights=torch.stack([torch.cat([w for _, w in calls]) for calls in layers]).numpy(),
        )
        routed.clear()
    return probs, routing_map


TopKRouter.forward = recorded_router_forward
if __name__ == "__main__":  # not again in a process spawned from this one (it imports this file as __mp_main__)
    sys.argv = ["pretrain_gpt.py", *sys.argv[1:]]
    runpy.run_path("pretrain_gpt.py", run_name="__main__")
