"""Weight-gradient deferral under FSDP (issue 18): DualPipeV's deferred weight gradients land in the weights the
forward used (FSDP's unsharded parameters) and FSDP reduces them, so every gradient after one step equals one
process's (the sequential schedule) on a PP2 x EP2 mesh of four gloo processes, and the weight-gradient slots
really ran deferred work on every rank. Before, the second pass targeted the modules' (sharded) parameters, which
are not in the graph: 53 of 71 gradients were off by up to 44%."""

import os

import pytest
import torch
from distributed_helpers import run_in_processes
from test_distributed import step_one_grads, write_config

from pithtrain.dualpipe.overlap import _weights
from pithtrain.tasks import pretrain_lm
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

# 8 sequences: 4 micro-batches per pipeline, the fewest DualPipeV takes on PP2, which still defers on every rank.
BATCH = ["training.global_batch_size=8"]
PP2xEP2 = [*BATCH, "distributed.pipeline_parallel_size=2", "distributed.expert_parallel_size=2"]


def test_weights_are_the_leaves_the_forward_used_not_the_modules_parameters():
    """The second pass must target the tensors in the graph: under FSDP a module's parameters (sharded) are not."""
    linear = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3, requires_grad=True)
    used = linear.weight.detach().clone().requires_grad_()  # what FSDP's unsharded parameter is to the graph
    y = torch.nn.functional.linear(x, used, linear.bias).tanh()
    weights = _weights([y], [x])
    assert {id(w) for w in weights} == {id(used), id(linear.bias)}
    torch.autograd.backward([y], [torch.ones_like(y)], inputs=weights)
    assert used.grad is not None and x.grad is None and linear.weight.grad is None


def grads_with_deferral(rank, world_size, config, overrides):
    os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"] = str(world_size), str(rank)
    run = pretrain_lm.setup(load_pretrain_cfg(config, overrides))
    pipeline = run.pipeline
    pipeline.defer_weight_grads = True  # setup turns it off under FSDP until pretrain_lm passes True
    deferred = []
    weight = pipeline._weight

    def counted():
        deferred.append(len(pipeline.weight_queue))
        weight()

    pipeline._weight = counted
    pretrain_lm.forward_backward(run, consumed=0)
    grads = {}
    for name, p in run.model.named_parameters():
        g = p.grad.full_tensor()  # every parameter is FSDP-sharded on this mesh
        if ".mlp.experts." in name:
            offset = run.model.get_submodule(name.rsplit(".", 1)[0]).expert_offset
            grads |= {f"{name}.{offset + e}": g[e] for e in range(g.shape[0])}
        else:
            grads[name] = g
    return grads, deferred


# DeepSeek-V2 adds a dense first layer and shared experts (FSDP units of their own), GPT-OSS expert biases.
@pytest.mark.parametrize(
    "family",
    ["qwen3_moe", pytest.param("deepseek_v2", marks=pytest.mark.slow), pytest.param("gpt_oss", marks=pytest.mark.slow)],
)
def test_deferred_weight_grads_under_fsdp_match_one_process(family, tmp_path):
    config = write_config(tmp_path, "defer", family)
    reference = step_one_grads(config, [*BATCH, f'run_dir="{tmp_path}/reference"'])
    results = run_in_processes(grads_with_deferral, 4, config, PP2xEP2, timeout_s=300)
    for _, deferred in results:
        assert deferred and all(n > 0 for n in deferred), deferred  # every slot ran a queued weight gradient
    grads = {}
    for rank_grads, _ in results:
        grads |= rank_grads
    assert grads.keys() == reference.keys()
    for name, ref in reference.items():
        rel = (grads[name] - ref).norm() / ref.norm().clamp_min(1e-30)
        assert rel < 1e-5, (name, float(rel))
