"""Analytical peak memory per rank of a training run: parameters, gradients, optimizer state, and the activations
of the micro-batches in flight under DualPipeV.

    python skills/estimate-memory/scripts/estimate.py CONFIG --nproc N [--set SECTION.KEY=VALUE ...]

The mesh comes from the config's `distributed` table (and --set); DP is what N leaves. Parameters are counted
from the model built on the meta device (nothing is allocated), then placed as the trainer places them: the
pipeline split (`pipeline_layer_split`; embedding, final norm and head on PP rank 0), experts divided by EP,
FSDP2's dim-0 shards (experts over DP x CP, the rest over DP x CP x EP; HSDP: over CP and CP x EP). Weights,
gradients and AdamW's two moments are fp32 (plus a 4-byte step per tensor). Activations per micro-batch and
layer follow a Qwen3-MoE model of the tensors autograd saves, fitted on CPU to the reference paths: fp32 and
bf16-autocast coefficients per token (hidden size, heads, experts per token, expert width) plus, under bf16
without FSDP, the bf16 weight copies the casts save; the head also keeps its fp32 weight gradient (formed in
the forward) per micro-batch. The micro-batches in flight are counted by replaying DualPipeV's eight phases.
"""

import argparse
import math
import sys
from dataclasses import dataclass

import torch

from pithtrain.dualpipe.dualpipev import pipeline_layer_split
from pithtrain.models import model_family
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

GiB = 2**30


@dataclass
class Mesh:
    world: int
    pp: int
    dp: int
    cp: int
    ep: int
    hsdp: bool


def mesh_of(cfg, nproc: int) -> Mesh:
    d = cfg.distributed
    pp, cp, ep = d.pipeline_parallel_size, d.context_parallel_size, d.expert_parallel_size
    if nproc % (pp * cp * ep):
        raise SystemExit(f"error: --nproc {nproc} is not a multiple of PP x CP x EP = {pp * cp * ep}")
    return Mesh(nproc, pp, nproc // (pp * cp * ep), cp, ep, d.hsdp)


def shard_rows(rows: int, parts: int, index: int) -> int:
    """Rows of dim 0 that shard `index` of `parts` holds (FSDP2 splits like torch.chunk)."""
    size = math.ceil(rows / parts)
    return max(0, min(size, rows - index * size))


def local_numels(cfg, mesh: Mesh, pp_rank: int, dense_index: int = 0, expert_index: int = 0) -> dict[str, int]:
    """name -> elements this rank holds; `*_index` is the rank's place in its FSDP shard group (0: the largest)."""
    family = model_family(cfg.model.family)
    with torch.device("meta"):
        model = family.model_class(cfg.model)
    keep = None
    if mesh.pp > 1:
        split = pipeline_layer_split(cfg.model.num_hidden_layers, mesh.pp)
        keep = {str(i) for i in split[pp_rank] + split[2 * mesh.pp - 1 - pp_rank]}
    fsdp = mesh.dp * mesh.cp * mesh.ep > 1
    dense_parts = (mesh.cp * mesh.ep) if mesh.hsdp else (mesh.dp * mesh.cp * mesh.ep)
    expert_parts = mesh.cp if mesh.hsdp else mesh.dp * mesh.cp
    out = {}
    for name, p in model.named_parameters():
        if name.startswith("model.layers."):
            if keep is not None and name.split(".")[2] not in keep:
                continue
        elif mesh.pp > 1 and pp_rank != 0:
            continue  # embedding, final norm and head live on PP rank 0
        shape = list(p.shape)
        expert = ".mlp.experts." in name
        if expert:  # stacked over experts on dim 0; the meta model may have been built for any EP
            shape[0] = getattr(cfg.model, family.experts_key) // mesh.ep
        if fsdp:
            parts, index = (expert_parts, expert_index) if expert else (dense_parts, dense_index)
            shape[0] = shard_rows(shape[0], parts, index)
        out[name] = math.prod(shape)
    return out


def in_flight(num_micro: int, pp: int, rank: int) -> tuple[int, int]:
    """Most micro-batches whose activations rank `rank` holds at once: (peak of both chunks together counted as
    (phase-0 count, phase-1 count) at that moment). Replays DualPipeV.step's phases; a paired forward/backward
    counts the forward first."""
    N, P, r = num_micro, pp, rank
    if P == 1:
        return 1, 0
    live, best = [0, 0], (0, 0)

    def f(phase):
        nonlocal best
        live[phase] += 1
        if sum(live) > sum(best):
            best = tuple(live)

    def b(phase):
        live[phase] -= 1

    for _ in range(2 * (P - r - 1)):
        f(0)
    for _ in range(r + 1):
        f(0), f(1)
    for _ in range(P - r - 1):
        b(1), f(1)
    for _ in range(N - 2 * P + r + 1):
        f(0), b(1), f(1), b(0)
    for _ in range(P - r - 1):
        b(1), f(1), b(0)
    return best


def activation_bytes_per_layer(m, tokens: int, bf16: bool) -> float:
    """Saved tensors of one Qwen3-MoE layer for one micro-batch of `tokens` tokens (see the module docstring)."""
    D, Hd, KVd, K, I, E = (
        m.hidden_size, m.num_attention_heads * m.head_dim, m.num_key_value_heads * m.head_dim,
        m.num_experts_per_tok, m.moe_intermediate_size, m.num_experts,
    )  # fmt: skip
    if bf16:
        return tokens * (21 * D + 4 * K * D + 10 * Hd + 10 * KVd + 8 * K * I + 4 * E + 232 * K)
    return tokens * 4 * (5.5 * D + 2 * K * D + 4 * Hd + 4 * KVd + 4 * K * I + 8 * K + E + 4)


def estimate(cfg, mesh: Mesh, pp_rank: int, bf16: bool, dense_index: int = 0, expert_index: int = 0) -> dict:
    """Bytes per term for one rank, and `total`."""
    numels = local_numels(cfg, mesh, pp_rank, dense_index, expert_index)
    params = 4 * sum(numels.values())
    terms = {"parameters": params, "gradients": params, "optimizer": 2 * params + 4 * len(numels)}
    m, tc = cfg.model, cfg.training
    if m.family != "qwen3_moe":
        terms["activations"] = None  # the activation model is fitted to qwen3_moe only
        terms["total"] = None
        return terms
    tokens = tc.micro_batch_size * cfg.data.seq_len // mesh.cp
    num_micro = tc.global_batch_size // (mesh.dp * mesh.ep * tc.micro_batch_size)
    per_layer = activation_bytes_per_layer(m, tokens, bf16)
    fsdp = mesh.dp * mesh.cp * mesh.ep > 1
    if bf16 and not fsdp:  # the casts of this rank's layer weights, saved per micro-batch
        layer_params = sum(n for name, n in numels.items() if name.startswith("model.layers."))
        per_layer_weights = 2 * layer_params / max(1, len({k.split(".")[2] for k in numels if "layers." in k}))
    else:
        per_layer_weights = 0
    if mesh.pp == 1:
        counts, layers, head_live = (1, 0), (m.num_hidden_layers, 0), 1
    else:
        split = pipeline_layer_split(m.num_hidden_layers, mesh.pp)
        counts = in_flight(num_micro, mesh.pp, pp_rank)
        layers = (len(split[pp_rank]), len(split[2 * mesh.pp - 1 - pp_rank]))
        head_live = counts[1] if pp_rank == 0 else 0
    layer_mb = sum(c * n for c, n in zip(counts, layers))
    head = head_live * (4 * m.vocab_size * m.hidden_size + 14 * m.hidden_size * tokens)
    terms["activations"] = layer_mb * (per_layer + per_layer_weights) + head
    terms["micro_batches_in_flight"] = sum(counts)
    terms["total"] = sum(terms[k] for k in ("parameters", "gradients", "optimizer", "activations"))
    return terms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--nproc", type=int, default=1, help="world size (GPUs in all)")
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16", help="activation precision")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override")
    args = ap.parse_args()
    cfg = load_pretrain_cfg(args.config, args.overrides)
    mesh = mesh_of(cfg, args.nproc)
    print(f"{args.config}: PP {mesh.pp} DP {mesh.dp} CP {mesh.cp} EP {mesh.ep} ({args.precision} activations), GiB")
    print(f"{'PP rank':>8} {'params':>9} {'grads':>9} {'optim':>9} {'activ':>9} {'in flight':>9} {'total':>9}")
    for r in range(mesh.pp):
        t = estimate(cfg, mesh, r, args.precision == "bf16")
        cells = [t[k] for k in ("parameters", "gradients", "optimizer", "activations")]
        row = " ".join(f"{c / GiB:9.3f}" if c is not None else f"{'n/a':>9}" for c in cells)
        total = f"{t['total'] / GiB:9.3f}" if t["total"] is not None else "  (no activation model for this family)"
        print(f"{r:>8} {row} {t.get('micro_batches_in_flight', '-'):>9} {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
