"""Process groups and the device mesh (PP, DP, CP, EP), FSDP2 wrapping, and the distributed gradient norm.

Launch with torchrun: `torchrun --nproc-per-node N -m pithtrain train CFG --set distributed.expert_parallel_size=2`.
DP is inferred: world_size / (PP x CP x EP). NCCL on CUDA, gloo on CPU (`setup_distributed`, the one place).
"""

import datetime
import os
import sys
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from pithtrain.config import ConfigError, Positive, Range
from pithtrain.contexts import distributed

if TYPE_CHECKING:  # the engine may not import the models; it relies on their contract only
    from pithtrain.models import DecoderLayer


@dataclass
class DistributedCfg:
    pipeline_parallel_size: Positive = 1
    """Pipeline stages (DualPipeV: each rank holds two model chunks)."""
    context_parallel_size: Positive = 1
    """Ranks that split each sequence (zigzag ring attention)."""
    expert_parallel_size: Positive = 1
    """Ranks that split each layer's experts; must divide model.num_experts."""
    hsdp: bool = False
    """Replicate weights across DP and shard them within CP x EP (HSDP), instead of sharding across all."""
    timeout_s: Annotated[int, Range(ge=10)] = 600
    """Collective timeout: a rank stuck this long fails the job instead of hanging."""


def _die_on_exception(exc_type, exc, tb):
    """A rank that raises takes the job down at once: print, then exit without waiting on peers."""
    traceback.print_exception(exc_type, exc, tb)
    sys.stderr.flush()
    os._exit(1)


def teardown_distributed() -> None:
    """End a finished run's process group while the interpreter is whole. Left to interpreter exit, gloo's worker
    threads can still hold work whose tensors need the GIL, and a rank whose run succeeded aborts (SIGABRT,
    "terminate called without an active exception"); seen once in 17 two-rank CPU runs of the launch test."""
    if dist.is_initialized():
        dist.destroy_process_group()


def setup_distributed(cfg: DistributedCfg, device: torch.device) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    pp, cp, ep = cfg.pipeline_parallel_size, cfg.context_parallel_size, cfg.expert_parallel_size
    if world % (pp * cp * ep):
        raise ConfigError(
            f"world size {world} is not divisible by pipeline_parallel_size x context_parallel_size x "
            f"expert_parallel_size = {pp} x {cp} x {ep}. Launch with a multiple of {pp * cp * ep} processes."
        )
    if world == 1:
        return
    dp = world // (pp * cp * ep)
    if distributed.mesh is not None:  # already set up in this process (tests run several trainings)
        assert (distributed.pp_size, distributed.dp_size, distributed.cp_size, distributed.ep_size) == (pp, dp, cp, ep)
        return
    distributed.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        torch.cuda.set_device(distributed.local_rank)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=cfg.timeout_s))
    sys.excepthook = _die_on_exception

    mesh = init_device_mesh(device.type, (pp, dp, cp, ep), mesh_dim_names=("pp", "dp", "cp", "ep"))
    d = distributed
    d.world_size, d.rank, d.mesh = world, dist.get_rank(), mesh
    d.pp_size, d.dp_size, d.cp_size, d.ep_size = pp, dp, cp, ep
    d.pp_rank, d.dp_rank, d.cp_rank, d.ep_rank = (mesh.get_local_rank(n) for n in ("pp", "dp", "cp", "ep"))
    d.cp_group, d.ep_group = mesh.get_group("cp"), mesh.get_group("ep")
    d.dp_ep_rank, d.dp_ep_size = d.dp_rank * ep + d.ep_rank, dp * ep
    dense = mesh["dp", "cp", "ep"]._flatten("dp_cp_ep")
    d.dp_cp_ep_group = dense.get_group()
    if cfg.hsdp:  # 2-D meshes: replicate across DP (outer), shard within
        mesh["cp", "ep"]._flatten("cp_ep")
        d.dense_fsdp_mesh, d.expert_fsdp_mesh = mesh["dp", "cp_ep"], mesh["dp", "cp"]
    else:
        d.dense_fsdp_mesh, d.expert_fsdp_mesh = dense, mesh["dp", "cp"]._flatten("dp_cp")

    # Pipeline channels: every rank creates every group, in the same order (new_group is collective).
    ranks = mesh.mesh  # (pp, dp, cp, ep) -> global rank
    d.pp_channels = {}
    for r in range(pp - 1):
        for channel in ("fwd0", "bwd0", "fwd1", "bwd1"):
            for idx in torch.cartesian_prod(*(torch.arange(s) for s in (dp, cp, ep))).reshape(-1, 3).tolist():
                pair = [int(ranks[r][tuple(idx)]), int(ranks[r + 1][tuple(idx)])]
                group = dist.new_group(pair)
                if d.rank in pair:
                    d.pp_channels[(channel, r)] = group


def apply_fsdp(model: torch.nn.Module, layers: "list[DecoderLayer]", device: torch.device) -> None:
    """FSDP2: experts over DP x CP, everything else over DP x CP x EP (or HSDP); gradients summed, not averaged.

    `layers` are the decoder layers this rank holds; only what `models.DecoderLayer` names is used. Gradients are
    sums because the loss is already normalised by the global token count, so every rank's contribution adds up."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard, register_fsdp_forward_method

    d = distributed
    if d.dp_size * d.cp_size * d.ep_size == 1:
        return
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if device.type == "cuda" else None
    kwargs = {"mp_policy": mp} if mp is not None else {}
    wrapped = []
    if d.pp_size == 1:  # without a pipeline each layer runs whole: one unit per layer (experts nested)
        for layer in layers:
            if layer.is_moe:
                wrapped.append(fully_shard(layer.mlp.experts, mesh=d.expert_fsdp_mesh, **kwargs))
            wrapped.append(fully_shard(layer, mesh=d.dense_fsdp_mesh, **kwargs))
    else:
        for layer in layers:
            # The pipeline runs a layer stage by stage (dualpipe/overlap.py), never through the layer's own forward,
            # so each unit is a submodule called inside one stage (attention and norms in stage 1, the router through
            # `route` in stage 1, experts in stage 3): its hooks gather and reduce within that stage's forward/backward.
            assert not list(layer.parameters(recurse=False)), "a layer's weights must live in its submodules"
            for name, child in layer.named_children():
                if name != "mlp":
                    wrapped.append(fully_shard(child, mesh=d.dense_fsdp_mesh, **kwargs))
            if layer.is_moe:
                wrapped.append(fully_shard(layer.mlp.experts, mesh=d.expert_fsdp_mesh, **kwargs))
                if layer.mlp.shared_experts is not None:  # called as a module in stage 1
                    wrapped.append(fully_shard(layer.mlp.shared_experts, mesh=d.dense_fsdp_mesh, **kwargs))
                wrapped.append(fully_shard(layer.mlp, mesh=d.dense_fsdp_mesh, **kwargs))  # the router's weights
                register_fsdp_forward_method(layer.mlp, "route")
            else:
                wrapped.append(fully_shard(layer.mlp, mesh=d.dense_fsdp_mesh, **kwargs))
    if d.pp_size == 1:
        wrapped.append(fully_shard(model, mesh=d.dense_fsdp_mesh, **kwargs))
    else:  # the pipeline calls these directly, so they are units of their own (a root's hook would never fire)
        for name in ("model.embed_tokens", "model.norm", "lm_head"):
            if hasattr(model.model if name.startswith("model.") else model, name.split(".")[-1]):
                wrapped.append(fully_shard(model.get_submodule(name), mesh=d.dense_fsdp_mesh, **kwargs))
    for module in wrapped:
        module.set_force_sum_reduction_for_comms(True)
        module.set_gradient_divide_factor(1.0)


def global_grad_norm(parameters, hsdp: bool) -> torch.Tensor:
    """Global L2 norm of all gradients (a 0-d fp32 tensor; clipping is applied inside the optimizer's pass,
    operators/adamw.py).

    Every rank holds a disjoint piece of the gradients (FSDP shards, its own experts, its own pipeline
    stage), so the squared norm is the world-wide sum of local squared norms; HSDP replicas count once."""
    grads = [p.grad for p in parameters if p.grad is not None]
    local = [g.to_local() if hasattr(g, "to_local") else g for g in grads]
    device = local[0].device if local else torch.device("cpu")
    sq = torch.zeros((), device=device, dtype=torch.float32)
    # foreach kernels: one read of every gradient, few launches.
    for dtype in sorted({g.dtype for g in local}, key=str):
        norms = torch._foreach_norm([g for g in local if g.dtype == dtype], 2, dtype=torch.float32)
        sq += torch.stack(norms).pow(2).sum()
    if distributed.world_size > 1:
        dist.all_reduce(sq)
        if hsdp:
            sq /= distributed.dp_size
    return sq.sqrt()
