"""Operators: each Triton kernel against its PyTorch reference, forward and backward, on awkward shapes
(size 1, not a multiple of the block, an expert with no tokens).

Kernel cases take a `device`: "cuda" where there is a GPU, and always "cpu" under the Triton interpreter.
triton fixes compiled-or-interpreted when `triton.language` is first imported, and pytest imports every
test module (so the model, so the operators) before running any. A process that did not start with
TRITON_INTERPRET=1 therefore runs the "cpu" cases in a child pytest that did
(`test_cpu_cases_under_interpreter`). The `launched` fixture records every kernel launch, and the cases
assert on it, so a path that silently took the reference fails.
"""

import pytest
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import KernelInterface
from triton_child import INTERPRETED, parametrize_device, run_under_interpreter

from pithtrain.operators import adamw, backend, cross_entropy, fp8, swiglu, token_permute, weight_cast


def pytest_generate_tests(metafunc):
    parametrize_device(metafunc)


@pytest.mark.skipif(INTERPRETED, reason="this is the interpreter child")
def test_cpu_cases_under_interpreter():
    run_under_interpreter(__file__)


class _Recorder:
    """Stands in for a kernel in its module: records the kernel's name at each launch, then launches it."""

    def __init__(self, kernel, launched):
        self.kernel, self.launched = kernel, launched

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launched.append(self.kernel.fn.__name__)
            return self.kernel[grid](*args, **kwargs)

        return launch


@pytest.fixture
def launched(monkeypatch, device):
    names = []
    for module in (token_permute, swiglu, fp8, cross_entropy, weight_cast, adamw):
        for name, kernel in list(vars(module).items()):
            if name.endswith("_kernel") and isinstance(kernel, KernelInterface):
                assert device == "cuda" or type(kernel).__name__ == "InterpretedFunction", f"{name} is compiled"
                monkeypatch.setattr(module, name, _Recorder(kernel, names))
    return names


def leaf(x, dtype=None):
    """A fresh leaf copy (optionally in another dtype) for comparing gradients."""
    return x.detach().to(dtype or x.dtype).requires_grad_()


# ---- the dispatch rule ----


def test_use_triton_rule(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not backend.use_triton(torch.zeros(1))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert backend.use_triton(torch.zeros(1))


def test_fast_paths_take_triton(device, launched, monkeypatch):
    for module, reference in [
        (token_permute, "permute_tokens"),
        (swiglu, "swiglu_reference"),
        (fp8, "quantize_1x128_reference"),
        (fp8, "quantize_128x128_reference"),
        (cross_entropy, "ce_rows_reference"),
    ]:
        monkeypatch.setattr(module, reference, lambda *a, name=reference: pytest.fail(f"{name} ran, not Triton"))
    x_TD, ids_TK = torch.randn(3, 4, device=device), torch.tensor([[0, 1], [1, 2], [0, 2]], device=device)
    x_ND, perm = token_permute.permute_tokens_fast(leaf(x_TD), ids_TK, 3)
    x_ND.sum().backward()  # the gather's backward: the combine kernel
    swiglu.swiglu(torch.randn(2, 6, device=device))
    fp8.quantize_1x128(x_TD)
    fp8.quantize_128x128(x_TD)
    cross_entropy.ce_rows(x_TD, torch.tensor([0, -100, 3], device=device))
    assert launched == [
        "_permute_kernel",
        "_combine_kernel",
        "_swiglu_fwd_kernel",
        "_quantize_1x128_kernel",
        "_quantize_128x128_kernel",
        "_ce_rows_kernel",
    ]


# ---- token permutation: gather into expert order (the backward sums each token's rows) ----

# (T, K, E, D): one token and one expert; expert E-1 never chosen; D over one 2048-wide block.
PERMUTE_SHAPES = [(1, 1, 1, 1), (7, 3, 6, 33), (2, 2, 3, 2100)]


def routing(T, K, E, device):
    """Distinct experts per token, never the last one (an expert with zero tokens) unless E == 1."""
    usable = max(E - 1, K)
    return torch.stack([torch.randperm(usable)[:K] for _ in range(T)]).to(device)


@pytest.mark.parametrize("T,K,E,D", PERMUTE_SHAPES)
def test_permute_tokens_triton(device, launched, T, K, E, D):
    x_TD, ids_TK = torch.randn(T, D, device=device), routing(T, K, E, device)
    x = leaf(x_TD)
    x_ND, perm = token_permute.permute_tokens_triton(x, ids_TK, E)
    x_ref = leaf(x_TD, torch.float64)
    x_ND_ref, perm_ref = token_permute.permute_tokens(x_ref, ids_TK, E)
    assert torch.equal(x_ND.double(), x_ND_ref) and torch.equal(perm.order_N, perm_ref.order_N)
    assert E == 1 or perm.tokens_per_expert_E[-1] == 0
    assert perm.tokens_per_expert_E.tolist() == perm_ref.tokens_per_expert_E.tolist()
    grad_ND = torch.randn_like(x_ND)
    x_ND.backward(grad_ND)
    x_ND_ref.backward(grad_ND.double())
    torch.testing.assert_close(x.grad.double(), x_ref.grad, rtol=1e-6, atol=1e-6)
    assert launched == ["_permute_kernel", "_combine_kernel"]


def test_gather_tokens_with_skipped_slots(device, launched):
    """The expert-parallel gathers: order names some (token, k) slots, not all (token 1 sends nothing, token 3
    one copy), and not in slot order; the backward sums each token's rows like index_select's would."""
    T, K, D = 4, 3, 5
    order_N = torch.tensor([11, 0, 2, 6, 7, 1], device=device)
    x_TD = torch.randn(T, D, device=device)
    x, x_ref = leaf(x_TD), leaf(x_TD, torch.float64)
    x_ND = token_permute.gather_tokens_fast(x, order_N, K)
    x_ND_ref = x_ref.index_select(0, order_N // K)
    assert torch.equal(x_ND.double(), x_ND_ref)
    grad_ND = torch.randn_like(x_ND)
    x_ND.backward(grad_ND)
    x_ND_ref.backward(grad_ND.double())
    torch.testing.assert_close(x.grad.double(), x_ref.grad, rtol=1e-6, atol=1e-6)
    assert not x.grad[1].any() and launched == ["_permute_kernel", "_combine_kernel"]


def test_permute_rows_backward_is_the_inverse_gather():
    index = torch.randperm(7)
    x = leaf(torch.randn(7, 3))
    y = token_permute.permute_rows(x, index, token_permute.inverse_order(index))
    grad = torch.randn(7, 3)
    y.backward(grad)
    assert torch.equal(y, x.detach()[index])
    assert torch.equal(x.grad[index], grad)


def test_permute_bf16(device, launched):
    """bf16 rows: the gather is exact, its backward (fp32 sums of each token's K rows) within bf16 rounding."""
    ids_TK = routing(5, 2, 4, device)
    x_TD = leaf(torch.randn(5, 40, device=device, dtype=torch.bfloat16))
    x_ND, perm = token_permute.permute_tokens_triton(x_TD, ids_TK, 4)
    assert torch.equal(x_ND, token_permute.permute_tokens(x_TD.detach(), ids_TK, 4)[0])
    grad_ND = torch.randn_like(x_ND)
    x_ND.backward(grad_ND)
    exact = torch.zeros(5, 40, dtype=torch.float64, device=device).index_add_(0, perm.order_N // 2, grad_ND.double())
    assert x_TD.grad.dtype == torch.bfloat16
    torch.testing.assert_close(x_TD.grad.double(), exact, rtol=1e-2, atol=1e-2)


def test_permute_no_tokens(device, launched):
    x_TD = leaf(torch.randn(0, 6, device=device))
    x_ND, perm = token_permute.permute_tokens_triton(x_TD, torch.zeros(0, 2, dtype=torch.long, device=device), 3)
    x_ND.sum().backward()
    assert x_ND.shape == (0, 6) and x_TD.grad.shape == (0, 6)
    assert perm.tokens_per_expert_E.tolist() == [0, 0, 0] and launched == []


# ---- SwiGLU ----


@pytest.mark.parametrize("shape", [(1, 2), (7, 10), (3, 1400), (2, 3, 8)])
def test_swiglu_triton(device, launched, shape):
    gate_up = torch.randn(shape, device=device) * 3
    g = leaf(gate_up)
    h = swiglu.swiglu_triton(g)
    g_ref = leaf(gate_up, torch.float64)
    h_ref = swiglu.swiglu_reference(g_ref)
    torch.testing.assert_close(h.double(), h_ref, rtol=1e-5, atol=1e-6)
    grad_h = torch.randn_like(h)
    h.backward(grad_h)
    h_ref.backward(grad_h.double())
    torch.testing.assert_close(g.grad.double(), g_ref.grad, rtol=1e-5, atol=1e-6)
    assert launched == ["_swiglu_fwd_kernel", "_swiglu_bwd_kernel"]


def test_swiglu_bf16(device, launched):
    gate_up = torch.randn(4, 12, device=device, dtype=torch.bfloat16)
    g, g_ref = leaf(gate_up), leaf(gate_up, torch.float64)
    h, h_ref = swiglu.swiglu_triton(g), swiglu.swiglu_reference(g_ref)
    assert h.dtype == torch.bfloat16
    torch.testing.assert_close(h.double(), h_ref, rtol=1e-2, atol=1e-2)
    h.sum().backward()
    h_ref.sum().backward()
    assert g.grad.dtype == torch.bfloat16
    torch.testing.assert_close(g.grad.double(), g_ref.grad, rtol=1e-2, atol=1e-2)


# ---- chunked linear + cross-entropy: the row kernel, then the whole op (PyTorch rows on CPU) ----


@pytest.mark.parametrize("C,V,dtype", [(1, 1, torch.float32), (5, 7, torch.float32), (4, 5000, torch.bfloat16)])
def test_ce_rows_kernel_matches_reference(C, V, dtype, device, launched):
    """V = 5000 spans two 4096-wide blocks, the second partial; every third token is ignored."""
    logits_CV = (torch.randn(C, V) * 4).to(dtype)
    labels_C = torch.randint(0, V, (C,))
    labels_C[::3] = cross_entropy.IGNORE_INDEX
    ref_CV = logits_CV.clone()
    loss_ref = cross_entropy.ce_rows_reference(ref_CV, labels_C)
    got_CV, labels_dev = logits_CV.to(device), labels_C.to(device)
    loss = cross_entropy.ce_rows(got_CV, labels_dev)
    assert launched == ["_ce_rows_kernel"]
    torch.testing.assert_close(loss.cpu(), loss_ref, rtol=1e-5, atol=1e-5)
    tol = 1e-6 if dtype == torch.float32 else 8e-3  # bf16: one rounding of the stored gradient apart at most
    torch.testing.assert_close(got_CV.cpu().float(), ref_CV.float(), rtol=tol, atol=tol)
    assert not got_CV[::3].any(), "ignored tokens must get a zero gradient"


@pytest.mark.parametrize("T,V,chunk", [(1, 5, 4), (10, 7, 4), (9, 3, 9), (6, 11, 100)])
def test_linear_cross_entropy_matches_reference(T, V, chunk, monkeypatch):
    h_TD, W_VD = torch.randn(T, 8, dtype=torch.float64), torch.randn(V, 8, dtype=torch.float64)
    labels_T = torch.randint(0, V, (T,))
    labels_T[::3] = cross_entropy.IGNORE_INDEX
    rows = []
    ce_rows = cross_entropy.ce_rows
    monkeypatch.setattr(cross_entropy, "ce_rows", lambda x, lab: rows.append(x.shape[0]) or ce_rows(x, lab))
    h, W = leaf(h_TD), leaf(W_VD)
    loss = cross_entropy.linear_cross_entropy(h, W, labels_T, chunk_size=chunk)
    (2.0 * loss).backward()
    assert max(rows) <= chunk and sum(rows) == T, "logits for more than one chunk of tokens at once"
    h_ref, W_ref = leaf(h_TD), leaf(W_VD)
    loss_ref = cross_entropy.linear_cross_entropy_reference(h_ref, W_ref, labels_T)
    (2.0 * loss_ref).backward()
    torch.testing.assert_close(loss, loss_ref.float(), rtol=1e-6, atol=1e-6)
    # Both take the log-softmax in fp32 (the reference's `.float()`), so gradients agree to fp32 precision.
    torch.testing.assert_close(h.grad, h_ref.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(W.grad, W_ref.grad, rtol=1e-5, atol=1e-6)


def test_linear_cross_entropy_fp32_weight_bf16_tokens():
    """fp32 master weights with bf16 activations (one GPU under autocast): the weight's gradient comes back
    in fp32, summed in fp32 over chunks, within bf16 precision of the fp64 reference."""
    h_TD, W_VD = torch.randn(12, 16), torch.randn(9, 16) * 0.5
    labels_T = torch.randint(0, 9, (12,))
    h, W = leaf(h_TD, torch.bfloat16), leaf(W_VD)
    loss = cross_entropy.linear_cross_entropy(h, W, labels_T, chunk_size=5)
    (loss / 12).backward()
    assert W.grad.dtype == torch.float32 and h.grad.dtype == torch.bfloat16
    h_ref, W_ref = leaf(h_TD, torch.float64), leaf(W_VD, torch.float64)
    loss_ref = cross_entropy.linear_cross_entropy_reference(h_ref, W_ref, labels_T)
    (loss_ref / 12).backward()
    torch.testing.assert_close(loss, loss_ref.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(W.grad.double(), W_ref.grad, rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(h.grad.double(), h_ref.grad, rtol=3e-2, atol=3e-2)


def test_linear_cross_entropy_all_ignored_and_bf16():
    h, W = leaf(torch.randn(5, 8, dtype=torch.bfloat16)), leaf(torch.randn(6, 8, dtype=torch.bfloat16))
    loss = cross_entropy.linear_cross_entropy(h, W, torch.full((5,), -100), chunk_size=2)
    loss.backward()
    assert loss.item() == 0.0 and not h.grad.any() and not W.grad.any()
    labels_T = torch.tensor([0, 5, -100, 2, 3])
    h, W, h_ref, W_ref = leaf(h), leaf(W), leaf(h), leaf(W)
    loss = cross_entropy.linear_cross_entropy(h, W, labels_T, chunk_size=2)
    loss_ref = cross_entropy.linear_cross_entropy_reference(h_ref, W_ref, labels_T)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, loss_ref)
    loss.backward()
    loss_ref.backward()
    assert h.grad.dtype == W.grad.dtype == torch.bfloat16
    torch.testing.assert_close(h.grad, h_ref.grad, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(W.grad, W_ref.grad, rtol=1e-2, atol=1e-2)


# ---- block-wise FP8 ----


def assert_same_fp8(got, want):
    (q, scale), (q_ref, scale_ref) = got, want
    assert q.dtype == torch.float8_e4m3fn and q.shape == q_ref.shape and q.is_contiguous()
    assert torch.equal(scale, scale_ref), (scale - scale_ref).abs().max()
    mismatch = (q.float() != q_ref.float()).sum().item()
    assert mismatch == 0, f"{mismatch} of {q.numel()} fp8 values differ"


@pytest.mark.parametrize("shape", [(1, 1), (5, 300), (33, 128), (130, 129)])
def test_quantize_triton(device, launched, shape):
    x = torch.randn(shape, device=device) * torch.logspace(-3, 3, shape[1], device=device)
    x[0, : min(shape[1], 128)] = 0.0  # an all-zero 1x128 block
    for dtype in (torch.float32, torch.bfloat16):
        assert_same_fp8(fp8.quantize_1x128_triton(x.to(dtype)), fp8.quantize_1x128_reference(x.to(dtype)))
        assert_same_fp8(fp8.quantize_128x128_triton(x.to(dtype)), fp8.quantize_128x128_reference(x.to(dtype)))
    assert launched == ["_quantize_1x128_kernel", "_quantize_128x128_kernel"] * 2


def test_quantize_1x128_column_major_scales(device, launched):
    """The scales cuBLAS reads, written column-major by the kernel: same values, no transposing copy."""
    x = torch.randn(33, 300, device=device, dtype=torch.bfloat16)
    q, scale = fp8.quantize_1x128_triton(x, scales_col_major=True)
    assert scale.shape == (33, 3) and scale.stride() == (1, 33)
    assert_same_fp8((q, scale.contiguous()), fp8.quantize_1x128_reference(x))
    assert launched == ["_quantize_1x128_kernel"]


@pytest.mark.parametrize("groups, group_rows, K", [(1, 128, 200), (3, 256, 128)])
def test_quantize_128x128_transposed(device, launched, groups, group_rows, K):
    """Stacked weights [G * R, K]: the quantised tiles and, from the same pass, each group's transpose [K, R]."""
    w = torch.randn(groups * group_rows, K, device=device) * torch.logspace(-2, 2, K, device=device)
    q, scale, qt = fp8.quantize_128x128_transposed(w, group_rows)
    assert_same_fp8((q, scale), fp8.quantize_128x128_reference(w))
    assert qt.shape == (groups, K, group_rows) and qt.is_contiguous()
    assert torch.equal(qt.float(), q.view(groups, group_rows, K).mT.float())
    assert launched == ["_quantize_128x128_kernel"]


def test_quantize_strided_input(device, launched):
    """x.t() quantises along the other dimension (128x1 tiles of x) without a transposed copy."""
    x = torch.randn(200, 3, device=device)
    assert_same_fp8(fp8.quantize_1x128_triton(x.t()), fp8.quantize_1x128_reference(x.t()))
    assert_same_fp8(fp8.quantize_128x128_triton(x.t()), fp8.quantize_128x128_reference(x.t()))
    assert len(launched) == 2


def test_quantize_rounds_to_nearest_even(device, launched):
    """Each row holds 448 (so its scale is exactly 1) and every e4m3 value, midpoint and near-midpoint:
    the kernel's rounding must agree with PyTorch's cast, ties to even, subnormals included."""
    grid = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()  # 0 .. 448, no NaN
    mid = (grid[1:] + grid[:-1]) / 2
    values = torch.cat([grid, mid, mid * (1 + 2**-20), mid * (1 - 2**-20)])
    values = torch.cat([values, -values])
    x = torch.cat([values, torch.full((-values.numel() % 127,), 448.0)]).view(-1, 127)
    x = torch.cat([x, torch.full((x.shape[0], 1), 448.0)], dim=1).to(device)
    q, scale = fp8.quantize_1x128_triton(x)
    assert torch.equal(scale, torch.ones_like(scale))
    assert torch.equal(q.float(), x.to(torch.float8_e4m3fn).float())
    assert launched == ["_quantize_1x128_kernel"]


def test_dequantize_round_trip():
    x = torch.randn(3, 260) * 5
    for quantize, dequantize in [
        (fp8.quantize_1x128_reference, fp8.dequantize_1x128),
        (fp8.quantize_128x128_reference, fp8.dequantize_128x128),
    ]:
        x_back = dequantize(*quantize(x))
        assert x_back.shape == x.shape
        assert (x_back - x).abs().max() <= x.abs().max() / 16  # e4m3 keeps 3 mantissa bits


# ---- weights: the gradient upcast, AdamW with the clipping factor inside ----


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


# ---- compiled for the GPU: catches what the interpreter lets through (numpy broadcasting, loose typing) ----

H200 = GPUTarget("cuda", 90, 32)


def compile_cases():
    """(kernel, argument types, constexprs): bf16 activations, H200-like sizes."""
    fp8_consts = dict(FP8_MAX=fp8.FP8_MAX, AMAX_FLOOR=fp8.AMAX_FLOOR)
    args = dict(src_ptr="*bf16", dst_ptr="*bf16", order_ptr="*i64")
    yield token_permute._permute_kernel, args, dict(D=2048, TOP_K=8, BLOCK_D=2048)
    args = dict(src_ptr="*bf16", dst_ptr="*bf16", inverse_ptr="*i64")
    yield token_permute._combine_kernel, args, dict(D=2100, TOP_K=8, BLOCK_D=2048)
    yield swiglu._swiglu_fwd_kernel, dict(gate_up_ptr="*bf16", h_ptr="*bf16", numel="i64", I="i32"), dict(BLOCK=1024)
    args = dict(gate_up_ptr="*bf16", grad_h_ptr="*bf16", grad_gate_up_ptr="*bf16", numel="i64", I="i32")
    yield swiglu._swiglu_bwd_kernel, args, dict(BLOCK=1024)
    args = dict(x_ptr="*bf16", q_ptr="*fp8e4nv", scale_ptr="*fp32", M="i32", K="i32", stride_m="i64", stride_k="i32")
    yield fp8._quantize_1x128_kernel, args, dict(BLOCK_M=16, **fp8_consts)
    args = dict(w_ptr="*fp32", q_ptr="*fp8e4nv", scale_ptr="*fp32", N="i32", K="i32", stride_n="i32", stride_k="i32")
    yield fp8._quantize_128x128_kernel, args, fp8_consts
    yield weight_cast._upcast_kernel, dict(src_ptr="*bf16", dst_ptr="*fp32", numel="i64"), dict(BLOCK=4096)
    args = {f"{n}_ptr": "*fp32" for n in ("param", "grad", "exp_avg", "exp_avg_sq", "coefs", "grad_factor")}
    args |= dict(numel="i64", lr="fp32", beta1="fp32", beta2="fp32", eps="fp32", weight_decay="fp32")
    yield adamw._adamw_kernel, args, dict(BLOCK=2048)


@pytest.mark.skipif(INTERPRETED, reason="kernels are interpreted in this process")
@pytest.mark.parametrize("kernel,args,constexprs", list(compile_cases()), ids=lambda v: getattr(v, "__name__", ""))
def test_kernel_compiles_for_h200(kernel, args, constexprs):
    """Frontend and ptxas for sm_90, no GPU needed: shape and dtype errors show here, not only on the GPU."""
    signature = {name: args.get(name, "constexpr") for name in kernel.arg_names}
    source = ASTSource(kernel, signature, constexprs=constexprs)
    compiled = triton.compile(source, target=H200, options={"enable_fp_fusion": True})  # launch's default
    assert compiled.asm["cubin"]
