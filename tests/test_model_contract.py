"""What every model family owes the trainer, checked for each on its tiny test config: its layers satisfy
`models.DecoderLayer` (the engine's only view of a layer), the five-stage split equals the eager
`reference_forward` (loss and gradients), and the grouped expert matmuls get the autocast dtype (the one-GPU
bf16 path, where the residual stream is fp32)."""

import dataclasses
import inspect
import sys
import types

import pytest
import torch
import torch.nn.functional as F
from test_deepseek_v2 import CFG as DEEPSEEK_V2_CFG
from test_gpt_oss import CFG as GPT_OSS_CFG
from test_qwen3_moe import CFG as QWEN3_MOE_CFG

from pithtrain.models import DecoderLayer, Experts, MoeBlock
from pithtrain.models.deepseek_v2 import DeepseekV2ForCausalLM
from pithtrain.models.gpt_oss import GptOssForCausalLM
from pithtrain.models.qwen3_moe import Qwen3MoeForCausalLM

FAMILIES = [
    pytest.param(Qwen3MoeForCausalLM, QWEN3_MOE_CFG, id="qwen3_moe"),
    pytest.param(DeepseekV2ForCausalLM, DEEPSEEK_V2_CFG, id="deepseek_v2"),
    pytest.param(GptOssForCausalLM, GPT_OSS_CFG, id="gpt_oss"),
]


def same_signatures(obj, protocol) -> list[str]:
    members = [n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_")]
    want = {n: list(inspect.signature(getattr(protocol, n)).parameters)[1:] for n in members}
    return [n for n in members if list(inspect.signature(getattr(obj, n)).parameters) != want[n]]


@pytest.mark.parametrize("model_class,cfg", FAMILIES)
def test_layers_satisfy_the_engine_contract(model_class, cfg):
    model = model_class(cfg)
    ids = torch.randint(0, cfg.vocab_size, (1, 5))
    cos, sin = model.rope(ids, torch.arange(5)[None])
    x_BSD = torch.randn(1, 5, cfg.hidden_size)
    kinds = set()
    for layer in model.model.layers.values():
        assert isinstance(layer, DecoderLayer) and not same_signatures(layer, DecoderLayer)
        assert not list(layer.parameters(recurse=False)), "weights belong in submodules"
        kinds.add(layer.is_moe)
        n_TD = layer.forward_stage1(x_BSD, cos, sin)[1]
        if not layer.is_moe:
            assert layer.num_experts == 0 and n_TD is None
            continue
        assert isinstance(layer.mlp, MoeBlock) and not same_signatures(layer.mlp, MoeBlock)
        assert isinstance(layer.mlp.experts, Experts) and layer.mlp.experts.expert_offset == 0
        assert n_TD.shape == (5, cfg.hidden_size)
        assert all(p.shape[0] == layer.num_experts for p in layer.mlp.experts.parameters())
        shared = layer.mlp.shared_experts
        assert shared is None or isinstance(shared, torch.nn.Module)
    assert True in kinds


@pytest.mark.parametrize("model_class,cfg", FAMILIES)
def test_stage_split_equals_reference_forward_with_grads(model_class, cfg):
    model = model_class(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 11))
    staged = model(ids, ids, aux_loss_scale=0.01)
    staged.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    reference = model(ids, ids, aux_loss_scale=0.01, reference=True)
    reference.backward()
    torch.testing.assert_close(staged, reference, rtol=1e-6, atol=1e-5)
    for n, p in model.named_parameters():  # fp32 sums in another order: relative norm of the difference
        assert (grads[n] - p.grad).norm() <= 1e-5 * p.grad.norm(), n


@pytest.mark.parametrize("model_class,cfg", FAMILIES)
def test_experts_run_in_the_autocast_dtype(model_class, cfg, monkeypatch):
    """autocast does not cover grouped matmuls: each model casts their inputs itself."""
    dtypes = []
    grouped_mm = torch._grouped_mm
    monkeypatch.setattr(torch, "_grouped_mm", lambda a, b, **kw: dtypes.append(a.dtype) or grouped_mm(a, b, **kw))
    model = model_class(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(ids, ids)
    assert dtypes and set(dtypes) == {torch.bfloat16} and loss.dtype == torch.float32


@pytest.mark.parametrize("model_class,cfg", FAMILIES)
def test_reference_shares_no_stage_code(model_class, cfg, monkeypatch):
    """The oracle computes attention, routing, experts and the combine itself: with every fast-path piece
    disabled it still runs."""
    model = model_class(cfg)
    for layer in model.model.layers.values():
        for piece, name in [(layer, "forward_stage1"), (layer, "forward_stage5"), (layer.self_attn, "forward")]:
            monkeypatch.setattr(piece, name, lambda *a, name=name, **k: pytest.fail(f"the reference called {name}"))
        if layer.is_moe:
            monkeypatch.setattr(layer.mlp, "route", lambda *a, **k: pytest.fail("the reference called route"))
            monkeypatch.setattr(layer.mlp.experts, "forward", lambda *a, **k: pytest.fail("called the experts"))
    ids = torch.randint(0, cfg.vocab_size, (2, 7))
    assert torch.isfinite(model(ids, ids, aux_loss_scale=0.01, reference=True))


@pytest.mark.parametrize("model_class,cfg", FAMILIES)
def test_reference_under_bf16_autocast(model_class, cfg):
    """Training's one-GPU path runs under bf16 autocast with an fp32 residual stream: the oracle must run there too,
    forward and backward, and agree within bf16 rounding, and so must each family's per-expert loop. (Gradients are
    compared in fp32 above: under bf16 a rounding difference can flip a router's choice, and gpt_oss's sink logit
    is rounded to bf16 on the fast path only.)"""
    model = model_class(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 11))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        staged = model(ids, ids, aux_loss_scale=0.01)
        reference = model(ids, ids, aux_loss_scale=0.01, reference=True)
    reference.backward()
    torch.testing.assert_close(staged, reference, rtol=2e-3, atol=0)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    experts = next(layer.mlp.experts for layer in model.model.layers.values() if layer.is_moe)
    x_TD, ids_TK = torch.randn(5, cfg.hidden_size), torch.tensor([[0, 1], [1, 2], [2, 0], [0, 2], [1, 0]])
    order = torch.argsort(ids_TK.flatten(), stable=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y_TKD = experts.reference_forward(x_TD, ids_TK)
        y_ND = experts(x_TD[order // 2], torch.bincount(ids_TK.flatten(), minlength=experts.gate_up_proj.shape[0]))
    torch.testing.assert_close(y_TKD.flatten(0, 1)[order].float(), y_ND.float(), rtol=2e-2, atol=2e-2)


ROUTER_PROBS = {  # each family's router probabilities, which its load-balancing loss is defined on
    "qwen3_moe": lambda mlp, x: F.linear(x, mlp.gate.weight).float().softmax(-1),
    "deepseek_v2": lambda mlp, x: F.linear(x, mlp.gate.weight).float().softmax(-1),  # scoring_func "softmax"
    "gpt_oss": lambda mlp, x: F.linear(x, mlp.router.weight, mlp.router.bias).float().softmax(-1),
}


@pytest.mark.parametrize("model_class,cfg", FAMILIES)
def test_aux_loss_gradient_is_the_scaled_balance_loss_s(model_class, cfg, monkeypatch):
    """The router's gradient with aux_loss_scale s, minus the one with 0, is exactly s x d(balance loss)/d(router),
    the loss taken on the routed choices (the forward is the same in both runs, so the token loss cancels). One
    MoE layer, the last, so no later layer's balance loss reaches it through the residual stream."""
    family = cfg.family
    dense = getattr(cfg, "first_k_dense_replace", 0)
    model = model_class(dataclasses.replace(cfg, num_hidden_layers=dense + 1))
    mlp = model.model.layers[str(dense)].mlp
    calls, route = [], mlp.route
    monkeypatch.setattr(mlp, "route", lambda x, s: calls.append((x.detach(), *route(x, s))) or calls[-1][1:])
    ids = torch.randint(0, cfg.vocab_size, (2, 11))
    router = [(n, p) for n, p in mlp.named_parameters() if n.split(".")[0] in ("gate", "router")]
    grads = []
    for scale in (0.0, 10.0):
        model.zero_grad()
        model(ids, ids, aux_loss_scale=scale).backward()
        grads.append([p.grad.clone() for _, p in router])
    x_BSD, ids_TK, _ = calls[-1]
    leaves = [p.detach().clone().requires_grad_() for _, p in router]
    modules = {}
    for (name, _), leaf in zip(router, leaves):
        setattr(modules.setdefault(name.split(".")[0], types.SimpleNamespace()), name.split(".")[1], leaf)
    probs_BSE = ROUTER_PROBS[family](types.SimpleNamespace(**modules), x_BSD)
    balance = sys.modules[model_class.__module__].load_balancing_loss
    aux = balance(probs_BSE, ids_TK.view(*x_BSD.shape[:2], -1), cfg.aux_loss_type)
    expected = torch.autograd.grad(10.0 * aux, leaves)
    for (name, _), without, with_aux, want in zip(router, *grads, expected):
        torch.testing.assert_close(with_aux - without, want, rtol=1e-4, atol=1e-6, msg=name)
    assert any(w.abs().max() > 1e-3 for w in expected)  # the balance loss really reaches the router


def test_engine_does_not_probe_layers_outside_the_contract():
    """The engine reads a layer through `DecoderLayer` only: no duck-typing probes, no parameter-name matching."""
    from conftest import REPO

    probes = ["getattr(layer", "hasattr(layer", "hasattr(layer.mlp", '".mlp.experts."', "n_TD is None"]
    engine = [p for d in ("modules", "dualpipe", "tasks") for p in (REPO / "pithtrain" / d).glob("*.py")]
    found = [f"{p.relative_to(REPO)}: {probe}" for p in engine for probe in probes if probe in p.read_text()]
    assert not found, found
