"""The weight-side kernels: `weight_cast.cast` (a weight's bf16 gradient back to fp32) against `Tensor.to`, and
`adamw.adamw_step` (clipping factor inside AdamW's pass) against `torch.optim.AdamW` on scaled gradients. "cpu"
cases run in a TRITON_INTERPRET=1 child (tests/triton_child.py); each case asserts that the Triton kernel ran, so
a path that silently took the reference fails."""

import pytest
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton_child import INTERPRETED, parametrize_device, run_under_interpreter

from pithtrain.operators import adamw, weight_cast


def pytest_generate_tests(metafunc):
    parametrize_device(metafunc)


@pytest.mark.skipif(INTERPRETED, reason="this is the interpreter child")
def test_cpu_cases_under_interpreter():
    run_under_interpreter(__file__)


@pytest.fixture
def launched(monkeypatch, device):
    names = []
    for module, name in [(weight_cast, "_upcast_kernel"), (adamw, "_adamw_kernel")]:
        kernel = getattr(module, name)

        class Recorder:
            def __getitem__(self, grid, kernel=kernel, name=name):
                names.append(name)
                return kernel[grid]

        monkeypatch.setattr(module, name, Recorder())
    return names


# ---- casts ----


@pytest.mark.parametrize("shape", [(1,), (3, 5), (2, 4097)])
def test_upcast_matches_torch(device, launched, shape):
    x = (torch.randn(shape, device=device) * 1e3).to(torch.bfloat16)
    x.view(-1)[0] = float("nan") if x.numel() > 1 else float("inf")
    up = weight_cast.cast(x, torch.float32)
    assert up.dtype == torch.float32 and torch.equal(up.nan_to_num(), x.float().nan_to_num())
    assert up.isnan().equal(x.isnan())
    assert torch.equal(weight_cast.cast(up, torch.bfloat16).nan_to_num(), x.nan_to_num())  # torch's downcast
    assert launched == ["_upcast_kernel"]


def test_cast_weight_gradient_in_weight_dtype(device, launched):
    w = torch.randn(3, 8, 5, device=device, requires_grad=True)
    x = torch.randn(4, 5, device=device, dtype=torch.bfloat16)
    y = x @ weight_cast.cast_weight(w, torch.bfloat16)[1].transpose(0, 1)  # a transposed use, as the experts'
    grad_y = torch.randn_like(y)
    y.backward(grad_y)
    w_ref = w.detach().clone().requires_grad_()
    (x @ w_ref.to(torch.bfloat16)[1].transpose(0, 1)).backward(grad_y)
    assert w.grad.dtype == torch.float32 and w.grad.is_contiguous()
    assert torch.equal(w.grad, w_ref.grad)
    assert launched == ["_upcast_kernel"]


def test_cast_weight_same_dtype_is_the_weight():
    w = torch.randn(2, 2, requires_grad=True)
    assert weight_cast.cast_weight(w, torch.float32) is w


# ---- AdamW with the clipping factor inside ----


def make_params(device):
    torch.manual_seed(0)
    shapes = [(7, 5), (4097,), (1,), (3, 2, 2)]
    return [torch.nn.Parameter(torch.randn(s, device=device)) for s in shapes]


def make_optimizer(params):
    groups = [{"params": params[:2], "weight_decay": 0.1}, {"params": params[2:], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.95), eps=1e-8)


@pytest.mark.parametrize("factor", [1.0, 0.37])
def test_adamw_step_matches_torch(device, launched, factor):
    params, ref_params = make_params(device), make_params(device)
    ref_params[3].requires_grad_(False)  # a parameter without a gradient: skipped on both sides
    params[3].requires_grad_(False)
    opt, ref_opt = make_optimizer(params), make_optimizer(ref_params)
    for step in range(3):
        for p, q in zip(params, ref_params):
            if p.requires_grad:
                p.grad = torch.randn_like(p) * (step + 1)
                q.grad = p.grad.clone()
        for group, ref_group in zip(opt.param_groups, ref_opt.param_groups):
            group["lr"] = ref_group["lr"] = 1e-2 / (step + 1)
        adamw.adamw_step(opt, torch.tensor(factor, device=device))
        torch._foreach_mul_([q.grad for q in ref_params if q.grad is not None], factor)
        ref_opt.step()
        for p, q in zip(params, ref_params):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)
            if p.requires_grad:
                for key in ("exp_avg", "exp_avg_sq"):
                    torch.testing.assert_close(opt.state[p][key], ref_opt.state[q][key], rtol=1e-5, atol=1e-6)
                assert float(opt.state[p]["step"]) == step + 1
    assert params[3] not in opt.state
    assert launched == ["_adamw_kernel"] * 9  # 3 parameters with gradients x 3 steps


def test_adamw_step_continues_torch_state(device, launched):
    """State made by torch's own step (as a checkpoint load makes it) is read and advanced in place."""
    params, ref_params = make_params(device), make_params(device)
    opt, ref_opt = make_optimizer(params), make_optimizer(ref_params)
    for step in range(2):
        for p, q in zip(params, ref_params):
            p.grad = torch.randn_like(p)
            q.grad = p.grad.clone()
        opt.step() if step == 0 else adamw.adamw_step(opt, torch.tensor(1.0, device=device))
        ref_opt.step()
    for p, q in zip(params, ref_params):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)
    assert launched == ["_adamw_kernel"] * 4


def test_adamw_step_refuses_unsupported_options(device):
    p = torch.nn.Parameter(torch.randn(3, device=device))
    p.grad = torch.ones_like(p)
    opt = torch.optim.AdamW([p], amsgrad=True)
    with pytest.raises(ValueError, match="amsgrad=True"):
        adamw.adamw_step(opt, torch.tensor(1.0, device=device))


def test_adamw_step_reference_on_cpu(monkeypatch):
    """Without Triton (a CPU run) the step is torch's, on gradients scaled by the factor."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    params, ref_params = make_params("cpu"), make_params("cpu")
    opt, ref_opt = make_optimizer(params), make_optimizer(ref_params)
    for p, q in zip(params, ref_params):
        p.grad = torch.randn_like(p)
        q.grad = p.grad * 0.5
    adamw.adamw_step(opt, torch.tensor(0.5))
    ref_opt.step()
    for p, q in zip(params, ref_params):
        torch.testing.assert_close(p, q)


# ---- compiled for the GPU ----

H200 = GPUTarget("cuda", 90, 32)


@pytest.mark.skipif(INTERPRETED, reason="kernels are interpreted in this process")
@pytest.mark.parametrize(
    "kernel,args",
    [
        (weight_cast._upcast_kernel, dict(src_ptr="*bf16", dst_ptr="*fp32", numel="i64")),
        (
            adamw._adamw_kernel,
            dict(
                **{f"{n}_ptr": "*fp32" for n in ("param", "grad", "exp_avg", "exp_avg_sq", "coefs", "grad_factor")},
                **dict(numel="i64", lr="fp32", beta1="fp32", beta2="fp32", eps="fp32", weight_decay="fp32"),
            ),
        ),
    ],
    ids=["upcast", "adamw"],
)
def test_kernel_compiles_for_h200(kernel, args):
    signature = {name: args.get(name, "constexpr") for name in kernel.arg_names}
    source = ASTSource(kernel, signature, constexprs={"BLOCK": 2048})
    assert triton.compile(source, target=H200, options={"enable_fp_fusion": True}).asm["cubin"]
