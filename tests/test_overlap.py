"""The staged forward/backward and the overlapped F/B driver (dualpipe/overlap.py) against plain autograd:
one micro-batch's backward overlapped with another's forward gives the same losses and gradients as the
whole model's forward and backward run one after the other, on one process and under EP2 (gloo)."""

import torch
import torch.distributed as dist
from distributed_helpers import run_in_processes

from pithtrain.contexts import distributed
from pithtrain.dualpipe.dualpipev import Chunk
from pithtrain.dualpipe.overlap import drain, overlap, staged_backward, staged_forward
from pithtrain.models.qwen3_moe import Qwen3MoeCfg, Qwen3MoeForCausalLM

CFG = Qwen3MoeCfg(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8, num_experts=6, num_experts_per_tok=3,
                  moe_intermediate_size=16, rope_theta=10000.0)  # fmt: skip
AUX = 0.01


def _model():
    torch.manual_seed(0)  # weights are seeded by name: every rank and both copies start identical
    return Qwen3MoeForCausalLM(CFG)


def _batches(rank: int):
    g = torch.Generator().manual_seed(100 + rank)
    return [torch.randint(0, CFG.vocab_size, (2, 8), generator=g) for _ in range(2)]


def _keep_result(gen, out: list):
    out.append((yield from gen))


def _sequential_and_overlapped(rank: int):
    """(sequential losses, overlapped losses, max relative grad difference, trace)."""
    a, b = _batches(rank)
    reference = _model()
    seq_losses = []
    for ids in (a, b):
        loss = reference(ids, ids, aux_loss_scale=AUX)
        loss.backward()
        seq_losses.append(loss.detach())

    model = _model()
    chunk = Chunk(layer_ids=list(range(CFG.num_hidden_layers)), has_embed=True, has_head=True)
    staged = [[], []]
    drain(_keep_result(staged_forward(model, chunk, None, a, None, a, AUX, 1, torch.float32), staged[0]))
    forward_b = _keep_result(staged_forward(model, chunk, None, b, None, b, AUX, 1, torch.float32), staged[1])
    trace = overlap(forward_b, staged_backward(staged[0][0][1], None))
    drain(staged_backward(staged[1][0][1], None))

    rel = 0.0
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert p.grad is not None, name
        rel = max(rel, float((p.grad - q.grad).norm() / q.grad.norm().clamp_min(1e-30)))
    return seq_losses, [s[0][0].detach() for s in staged], rel, trace


def _check(seq_losses, overlapped_losses, rel, trace):
    torch.testing.assert_close(torch.stack(overlapped_losses), torch.stack(seq_losses), rtol=1e-6, atol=0)
    assert rel < 1e-5, rel
    # Each job's stages all ran; every pair is one job's comm issued beside the other job's compute.
    flat = [step for tick in trace for step in tick]
    stages_per_moe_layer = ["compute", "comm", "compute", "comm", "compute"]
    forward = ["compute"] + stages_per_moe_layer * CFG.num_hidden_layers + ["compute"]  # embedding, layers, head
    assert [k for job, k in flat if job == "F"] == forward
    assert [k for job, k in flat if job == "B"] == forward[::-1]
    pairs = [tick for tick in trace if len(tick) == 2]
    for (job1, kind1), (job2, kind2) in pairs:
        assert job1 != job2 and (kind1, kind2) == ("comm", "compute")
    # Every comm stage of either job hides under a compute stage of the other.
    assert sum(1 for (job, _), _ in pairs if job == "F") == 2 * CFG.num_hidden_layers, trace
    assert len(pairs) == 4 * CFG.num_hidden_layers, trace


def test_overlapped_matches_sequential_one_process():
    _check(*_sequential_and_overlapped(0))


def _ep_worker(rank, world_size):
    distributed.ep_size, distributed.ep_rank, distributed.rank = world_size, rank, rank
    distributed.ep_group = dist.group.WORLD
    return _sequential_and_overlapped(rank)


def test_overlapped_matches_sequential_ep2():
    for result in run_in_processes(_ep_worker, 2):
        _check(*result)


def _fsdp_worker(rank, world_size):
    """DP2, the pipeline's FSDP wrapping: units inside stages gather and reduce within them."""
    from torch.distributed.device_mesh import init_device_mesh

    from pithtrain.modules.distributed import apply_fsdp
    from pithtrain.tasks.pretrain_lm import compile_layers

    d = distributed
    d.world_size, d.rank, d.dp_size, d.dp_rank = world_size, rank, world_size, rank
    d.pp_size = 2  # wrap as the pipeline does: embedding, norm and head are units of their own
    d.dense_fsdp_mesh = d.expert_fsdp_mesh = init_device_mesh("cpu", (world_size,), mesh_dim_names=("dp",))
    a, b = _batches(0)  # the same data on both ranks: summed gradients are twice one process's
    reference = _model()
    for ids in (a, b):
        reference(ids, ids, aux_loss_scale=AUX).backward()

    model = _model()
    apply_fsdp(model, list(model.model.layers.values()), torch.device("cpu"))
    chunk = Chunk(layer_ids=list(range(CFG.num_hidden_layers)), has_embed=True, has_head=True)
    staged = [[], []]
    drain(_keep_result(staged_forward(model, chunk, None, a, None, a, AUX, 1, torch.float32), staged[0]))
    forward_b = _keep_result(staged_forward(model, chunk, None, b, None, b, AUX, 1, torch.float32), staged[1])
    overlap(forward_b, staged_backward(staged[0][0][1], None))
    drain(staged_backward(staged[1][0][1], None))
    rel = 0.0
    for p, q in zip(model.parameters(), reference.parameters()):
        rel = max(rel, float((p.grad.full_tensor() - 2 * q.grad).norm() / q.grad.norm().clamp_min(1e-30)))

    # training.compile under FSDP: stage 1 holds FSDP units, whose dynamo-disabled hooks split its graph.
    compiled = _model()
    apply_fsdp(compiled, list(compiled.model.layers.values()), torch.device("cpu"))
    compile_layers(compiled, fullgraph=False, backend="eager")
    d.pp_size = 1
    loss = compiled(a, a, aux_loss_scale=AUX)
    return rel, float(loss), float(reference(a, a, aux_loss_scale=AUX))


def test_fsdp_units_inside_stages_dp2():
    for rel, compiled_loss, reference_loss in run_in_processes(_fsdp_worker, 2, timeout_s=120):
        assert rel < 1e-5, rel
        assert abs(compiled_loss - reference_loss) <= 1e-5 * abs(reference_loss)
