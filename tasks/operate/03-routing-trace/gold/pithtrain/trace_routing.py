"""Gold for Collect Routing Trace on pithtrain: run the training steps of `pithtrain train` from the provided
weights, with every MoE layer's router wrapped so that each step's choices are written out.

    python trace_routing.py CONFIG --set checkpoint.init_from=DIR [--set ...]

Step N writes artifacts/routing-traces/step-0000000N.npz: `expert_ids` int32 and `gate_weights` float32 (the
chosen experts' weights renormalised over top_k), shape (MoE layers, global batch, sequence, top_k). One
process, so this rank's batch is the global batch, micro-batches in order.
"""

import argparse
from pathlib import Path

import numpy as np
import torch

from pithtrain.modules.checkpoint import load_checkpoint, read_meta
from pithtrain.tasks.pretrain_lm import forward_backward, load_pretrain_cfg, optimizer_step, setup

OUT = Path("artifacts/routing-traces")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    args = p.parse_args()
    cfg = load_pretrain_cfg(args.config, args.overrides)
    run = setup(cfg)
    load_checkpoint(read_meta(cfg.checkpoint.init_from)["path"], run.model)
    moe = [layer for layer in run.model.model.layers.values() if layer.is_moe]
    seen: dict[int, list] = {i: [] for i in range(len(moe))}

    def recording(i, route):
        def wrapped(x_BSD, aux_loss_scale):
            ids_TK, w_TK = route(x_BSD, aux_loss_scale)
            B, S, _ = x_BSD.shape
            w = w_TK.detach().float()
            seen[i].append((ids_TK.view(B, S, -1).cpu(), (w / w.sum(-1, keepdim=True)).view(B, S, -1).cpu()))
            return ids_TK, w_TK

        return wrapped

    for i, layer in enumerate(moe):
        layer.mlp.route = recording(i, layer.mlp.route)
    OUT.mkdir(parents=True, exist_ok=True)
    tc = cfg.training
    for step in range(tc.max_steps):
        loss_sum, num_tokens = forward_backward(run, step * tc.global_batch_size)
        optimizer_step(run, step)
        ids = torch.stack([torch.cat([b[0] for b in seen[i]]) for i in seen])
        weights = torch.stack([torch.cat([b[1] for b in seen[i]]) for i in seen])
        np.savez(OUT / f"step-{step + 1:08d}.npz", expert_ids=ids.numpy().astype(np.int32),
                 gate_weights=weights.numpy().astype(np.float32))  # fmt: skip
        print(
            f"step {step + 1}/{tc.max_steps} loss {float(loss_sum) / num_tokens:.4f} trace {tuple(ids.shape)}",
            flush=True,
        )
        for i in seen:
            seen[i].clear()


if __name__ == "__main__":
    main()
