"""FP8 linear layers, y = x W^T with 1x128 activation and 128x128 weight scales (DeepSeek-V3, sec. 3.3): dense
(attention projections; the head's two matmuls in operators/cross_entropy.py through `matmul_quantized_weight`)
and grouped (routed experts).

Shapes: M tokens, K input features, N output features; Kb = K / 128 (all three multiples of 128).

Forward, dgrad and wgrad each run one block-scaled FP8 matmul (`torch.nn.functional.scaled_mm`, cuBLAS on
Hopper; rates measured by benchmarks/kernel_probe.py in benchmarks/NOTES.md):
- forward  y_MN  = (x_MK, 1x128 along K)   @ (W_NK, 128x128)^T
- dgrad    dx_MK = (dy_MN, 1x128 along N)  @ (W^T_KN, 128x128)^T       (128x128 tiles transpose exactly)
- wgrad    dW_NK = (dy^T_NM, 1x128 along M) @ (x^T_KM, 1x128 along M)^T
x^T is quantised in the forward and kept instead of x (half the bytes). Inside `step_weight_cache()`, which the
trainer enters for one step's forward and backward (between two optimizer steps), quantised weights (and their
transposes) are kept, so each weight is quantised once per step, not once per micro-batch; outside it (an
evaluation, a profiler, a test) every call quantises the weight as it is now.

Grouped (`fp8_grouped_linear`, experts' weights [E, N, K], or [E, K, N] with weight_kn as GPT-OSS stores them):
forward and dgrad through the Triton kernel of operators/fp8_gemm.py (no block-scaled grouped matmul in torch for
Hopper); wgrad stays bf16 (`torch._grouped_mm`): its contraction runs over each expert's tokens, whose counts are
not multiples of 128.

On CPU the same math runs through dequantisation and an fp32 matmul (`_mm_reference`), so the quantisation
and the scale bookkeeping are tested without a GPU; the cuBLAS layouts are tested on CUDA.
"""

import contextlib

import torch
import torch.nn.functional as F

from pithtrain.operators.fp8 import BLOCK, dequantize_1x128, quantize_1x128, quantize_128x128_transposed
from pithtrain.operators.fp8_gemm import fp8_grouped_mm
from pithtrain.operators.weight_cast import cast

_weight_cache: dict[int, tuple] | None = None  # id(weight) -> (weight, its quantised forms); a dict only in a step


@contextlib.contextmanager
def step_weight_cache():
    """Quantise each weight once for the duration of this context: the weights must not change inside it (enter it
    after one optimizer step, leave it before the next). The cache is dropped on exit."""
    global _weight_cache
    outer, _weight_cache = _weight_cache, {}
    try:
        yield
    finally:
        _weight_cache = outer


def quantized_weight(w_NK: torch.Tensor):
    """(q_NK, s_NbKb, q_KN, s_KbNb), quantised on first use in a `step_weight_cache()` (else on every call);
    [E, ...] for stacked experts."""
    cached = _weight_cache.get(id(w_NK)) if _weight_cache is not None else None
    if cached is None or cached[0] is not w_NK:  # the entry holds the weight, so its id cannot be reused meanwhile
        *E, N, K = w_NK.shape  # experts: N is a multiple of 128, so no 128x128 tile spans two experts
        q_NK, s_NbKb, q_KN = quantize_128x128_transposed(w_NK.detach().reshape(-1, K), group_rows=N)
        q_NK, s_NbKb, q_KN = q_NK.view(*E, N, K), s_NbKb.view(*E, -1, s_NbKb.shape[-1]), q_KN.view(*E, K, N)
        s_KbNb = s_NbKb.mT.contiguous()
        if not E:  # a dense weight: its scales padded as cuBLAS reads them, once per step
            s_NbKb, s_KbNb = _pad_tile_scales(s_NbKb), _pad_tile_scales(s_KbNb)
        cached = (w_NK, q_NK, s_NbKb, q_KN, s_KbNb)
        if _weight_cache is not None:
            _weight_cache[id(w_NK)] = cached
    return cached[1:]


def _pad_tile_scales(s_NbKb: torch.Tensor) -> torch.Tensor:
    """[Nb, Kb] -> [Nb, Kb rounded up to 4], zero-padded: cuBLAS reads 128x128 scales as [Kb4, Nb] column-major."""
    Nb, Kb = s_NbKb.shape
    return torch.nn.functional.pad(s_NbKb, (0, -Kb % 4))


def _col_major(t: torch.Tensor) -> torch.Tensor:
    return t.t().contiguous().t()  # no copy if t is column-major already


def _mm_reference(qa, sa, qb, sb, b_tiles: bool) -> torch.Tensor:
    """(qa * sa) @ (qb * sb)^T in fp32: sa 1x128 along K; sb padded 128x128 tiles (b_tiles) or 1x128 along K."""
    a = dequantize_1x128(qa, sa)
    N, K = qb.shape
    b = qb.float() * (sb.repeat_interleave(BLOCK, 0) if b_tiles else sb).repeat_interleave(BLOCK, 1)[:N, :K]
    return a @ b.t()


def scaled_mm(qa_MK, sa_MKb, qb_NK, sb, b_tiles: bool) -> torch.Tensor:
    """bf16 (qa * sa) @ (qb * sb)^T; sa 1x128 along K; sb 128x128 tiles from `quantized_weight` ([Nb, Kb] padded
    to a multiple of 4 columns) with b_tiles, else 1x128 [N, Kb]. Column-major 1x128 scales
    (`quantize_1x128(..., scales_col_major=True)`) go to cuBLAS without a copy."""
    if not qa_MK.is_cuda:
        return _mm_reference(qa_MK, sa_MKb, qb_NK, sb, b_tiles).to(torch.bfloat16)
    st = F.ScalingType
    scale_b = (sb.t(), st.BlockWise128x128) if b_tiles else (_col_major(sb), st.BlockWise1x128)
    a = (_col_major(sa_MKb), st.BlockWise1x128)
    return F.scaled_mm(qa_MK, qb_NK.t(), *a, *scale_b, output_dtype=torch.bfloat16)


def matmul_quantized_weight(x_MK: torch.Tensor, q_NK: torch.Tensor, s_NbKb: torch.Tensor) -> torch.Tensor:
    """bf16 x @ W^T: x (bf16) quantised 1x128 here, W from `quantized_weight` (q_NK, s_NbKb or q_KN, s_KbNb)."""
    return scaled_mm(*quantize_1x128(x_MK, scales_col_major=True), q_NK, s_NbKb, b_tiles=True)


# The dense forward and backward are custom ops: torch.compile sees each as one opaque call with a shape rule
# (the `register_fake`s), so stage 1, where the attention projections run, still compiles as one graph.
@torch.library.custom_op("pithtrain::fp8_linear_forward", mutates_args=())
def fp8_linear_forward(x_MK: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y_MN bf16, and x^T quantised for wgrad: q_KM, s_KMb)."""
    q_NK, s_NbKb, _, _ = quantized_weight(weight)
    y_MN = matmul_quantized_weight(x_MK, q_NK, s_NbKb)
    return (y_MN, *quantize_1x128(x_MK.t(), scales_col_major=True))


@fp8_linear_forward.register_fake
def _(x_MK, weight):
    (M, K), N = x_MK.shape, weight.shape[0]
    y_MN = x_MK.new_empty(M, N, dtype=torch.bfloat16)
    s_KMb = x_MK.new_empty(-(-M // BLOCK), K, dtype=torch.float32).t()  # column-major, as the op makes it
    return y_MN, x_MK.new_empty(K, M, dtype=torch.float8_e4m3fn), s_KMb


@torch.library.custom_op("pithtrain::fp8_linear_backward", mutates_args=())
def fp8_linear_backward(
    dy_MN: torch.Tensor, q_KM: torch.Tensor, s_KMb: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx_MK bf16, dW_NK in the weight's dtype)."""
    _, _, q_KN, s_KbNb = quantized_weight(weight)
    dx_MK = matmul_quantized_weight(dy_MN, q_KN, s_KbNb)
    dW_NK = scaled_mm(*quantize_1x128(dy_MN.t(), scales_col_major=True), q_KM, s_KMb, b_tiles=False)
    return dx_MK, cast(dW_NK, weight.dtype)


@fp8_linear_backward.register_fake
def _(dy_MN, q_KM, s_KMb, weight):
    return dy_MN.new_empty(dy_MN.shape[0], q_KM.shape[0], dtype=torch.bfloat16), torch.empty_like(weight)


def _fp8_linear_setup_context(ctx, inputs, output):
    ctx.save_for_backward(output[1], output[2], inputs[1])


def _fp8_linear_backward(ctx, grad_y_MN, _grad_q, _grad_s):
    q_KM, s_KMb, weight = ctx.saved_tensors
    return fp8_linear_backward(grad_y_MN.to(torch.bfloat16).contiguous(), q_KM, s_KMb, weight)


fp8_linear_forward.register_autograd(_fp8_linear_backward, setup_context=_fp8_linear_setup_context)


def fp8_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`F.linear(x, weight)` (no bias) through FP8 matmuls; bf16 output. Token count and both feature sizes
    must be multiples of 128 (checked at set-up)."""
    x_MK = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)
    return fp8_linear_forward(x_MK, weight)[0].view(*x.shape[:-1], -1)


class FP8GroupedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x_MK, weight, offs_E, weight_kn: bool):
        x_MK = x_MK.to(torch.bfloat16)
        q_ENK, s_ENbKb, q_EKN, s_EKbNb = quantized_weight(weight)
        if weight_kn:  # stored [E, K, N]: the quantiser's plain and transposed forms swap roles (128x128 tiles
            q_ENK, s_ENbKb, q_EKN, s_EKbNb = q_EKN, s_EKbNb, q_ENK, s_ENbKb  # transpose exactly), same layouts
        y_MN = fp8_grouped_mm(*quantize_1x128(x_MK), q_ENK.mT, s_ENbKb.mT, offs_E)
        ctx.save_for_backward(x_MK, q_EKN, s_EKbNb, offs_E)
        ctx.w_dtype, ctx.weight_kn = weight.dtype, weight_kn
        return y_MN

    @staticmethod
    def backward(ctx, grad_y_MN):
        x_MK, q_EKN, s_EKbNb, offs_E = ctx.saved_tensors
        dy_MN = grad_y_MN.to(torch.bfloat16).contiguous()
        dx_MK = fp8_grouped_mm(*quantize_1x128(dy_MN), q_EKN.mT, s_EKbNb.mT, offs_E)
        if ctx.weight_kn:
            dW = torch._grouped_mm(x_MK.t(), dy_MN, offs=offs_E)  # [E, K, N]
        else:
            dW = torch._grouped_mm(dy_MN.t(), x_MK, offs=offs_E)  # [E, N, K]
        return dx_MK, cast(dW, ctx.w_dtype), None, None


def fp8_grouped_linear(x_MK: torch.Tensor, weight: torch.Tensor, offs_E: torch.Tensor, weight_kn: bool = False):
    """Rows of expert e (rows offs[e-1] .. offs[e]-1, sorted by expert) times weight[e]^T, or times weight[e] with
    weight_kn (weights stored [E, K, N]); bf16 output."""
    return FP8GroupedLinear.apply(x_MK, weight, offs_E, weight_kn)
