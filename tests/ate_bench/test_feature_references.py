"""The four feature tasks' eager references (tasks/feature/*/reference.py) against identities the papers imply.
Their cross-check against the authors' code is recorded in tasks/feature/CROSSCHECK.md."""

import importlib.util

import torch
import torch.nn.functional as F
from conftest import REPO


def _load(slug):
    path = REPO / "tasks" / "feature" / slug / "reference.py"
    spec = importlib.util.spec_from_file_location(f"reference_{slug.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


moba = _load("01-moba")
dynmoe = _load("02-dynmoe")
diff = _load("03-diff-attention")
moepp = _load("04-moe-plus-plus")


def _causal(q, k, v):
    return F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    ).transpose(1, 2)


def test_moba_with_every_block_selected_is_dense_causal_attention():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 40, 3, 8, dtype=torch.float64) for _ in range(3))  # 40 = 5 blocks of 8
    assert torch.allclose(moba.moba_attention_reference(q, k, v, 8, 5), _causal(q, k, v), atol=1e-12)
    assert not torch.allclose(moba.moba_attention_reference(q, k, v, 8, 2), _causal(q, k, v), atol=1e-3)


def test_moba_top1_attends_to_the_own_block_only_and_never_to_the_future():
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 24, 2, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = moba.moba_attention_reference(q, k, v, 8, 1)
    for b in range(3):
        s = slice(8 * b, 8 * b + 8)
        assert torch.allclose(out[:, s], _causal(q[:, s], k[:, s], v[:, s]), atol=1e-12)
    out[:, 10].sum().backward()  # token 10 lives in block 1
    assert k.grad[:, 11:].abs().sum() == 0 and v.grad[:, 11:].abs().sum() == 0


def test_dynmoe_weights_are_one_over_k_with_fallback_and_cap():
    torch.manual_seed(2)
    x, w = torch.randn(50, 16, dtype=torch.float64), torch.randn(8, 16, dtype=torch.float64)
    thresholds = torch.randn(8, dtype=torch.float64, requires_grad=True)
    weights = dynmoe.dynmoe_gate_reference(x, w, thresholds, k_max=3)
    assert torch.allclose(weights.sum(-1), torch.ones(50, dtype=torch.float64))
    k = (weights > 0).sum(-1)
    assert int(k.max()) <= 3
    assert torch.allclose(weights[weights > 0], (1 / k.repeat_interleave(k)).to(weights.dtype))
    (weights * torch.randn_like(weights)).sum().backward()
    assert thresholds.grad.abs().sum() > 0  # straight-through: the thresholds learn
    high = dynmoe.dynmoe_gate_reference(x, w, torch.full((8,), 10.0, dtype=torch.float64), k_max=3)
    scores = F.normalize(x, dim=-1) @ F.normalize(w, dim=-1).T
    assert torch.equal(high, F.one_hot(scores.argmax(-1), 8).to(high.dtype))


def test_differential_attention_with_equal_halves_is_normalised_attention():
    torch.manual_seed(3)
    q, k = torch.randn(2, 12, 2, 4, dtype=torch.float64), torch.randn(2, 12, 2, 4, dtype=torch.float64)
    v, weight = torch.randn(2, 12, 2, 6, dtype=torch.float64), torch.rand(6, dtype=torch.float64) + 0.5
    zeros = torch.zeros(4, dtype=torch.float64)
    lambda_init = diff.lambda_init_for_layer(1)  # 0.2: A1 - 0.2 A1 = 0.8 A1, which the RMSNorm undoes
    out = diff.differential_attention_reference(q, k, q, k, v, zeros, zeros, zeros, zeros, lambda_init, weight, 0.0)
    a = _causal(q, k, v)
    expected = a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True)) * weight * (1 - lambda_init)
    assert torch.allclose(out, expected, atol=1e-10)
    assert abs(diff.lambda_init_for_layer(4) - (0.8 - 0.6 * 2.718281828459045**-0.9)) < 1e-12


def test_moepp_zero_copy_constant_experts_and_gating_residual():
    torch.manual_seed(4)
    T, D, Fn, C = 10, 6, 3, 2
    E = Fn + 1 + 1 + C
    x, ffn = torch.randn(T, D, dtype=torch.float64), torch.randn(T, Fn, D, dtype=torch.float64)
    v, wc = torch.randn(C, D, dtype=torch.float64), torch.randn(C, 2, D, dtype=torch.float64)
    logits, prev, wg = (
        torch.randn(T, E, dtype=torch.float64),
        torch.randn(T, E, dtype=torch.float64),
        torch.randn(E, E, dtype=torch.float64),
    )
    y, routed = moepp.moepp_expert_mix_reference(x, logits, prev, wg, ffn, v, wc, E, 1, 1)
    assert torch.allclose(routed, logits + prev @ wg.T)
    p = routed.softmax(-1)
    a = torch.einsum("td,cjd->tcj", x, wc).softmax(-1)
    const = a[..., :1] * x[:, None] + a[..., 1:] * v[None]
    expected = (p[:, :Fn, None] * ffn).sum(1) + p[:, Fn + 1, None] * x + (p[:, Fn + 2 :, None] * const).sum(1)
    assert torch.allclose(y, expected, atol=1e-12)
    y1, routed1 = moepp.moepp_expert_mix_reference(x, logits, None, wg, ffn, v, wc, 2, 1, 1)
    assert torch.equal(routed1, logits) and y1.shape == (T, D)
