"""A weight used in a lower precision than it is stored in (fp32 experts in bf16 grouped matmuls), with the
gradient cast back at memory speed.

torch casts bf16 to fp32 on CUDA through its dynamic-casting copy, one element per thread: in the profiles of
benchmarks/NOTES.md the fp32 gradients of the experts' bf16 weights came back at about 1.4 TB/s, twice the time
of the (vectorised) fp32 -> bf16 cast of the same weights in the forward. One Triton pass does either direction.

Shapes: any; the Triton pass takes contiguous tensors (others go through `Tensor.to`).
"""

import torch
import triton
import triton.language as tl

from pithtrain.operators import backend

BLOCK = 4096


@triton.jit
def _cast_kernel(src_ptr, dst_ptr, numel, BLOCK: tl.constexpr):
    """fp32 -> bf16 or bf16 -> fp32."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    x = tl.load(src_ptr + offs, mask=mask)
    if dst_ptr.dtype.element_ty == tl.bfloat16:
        # Round to nearest even by hand: the interpreter's cast truncates (on the GPU this is what cvt.rn does).
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        y = tl.where(x != x, float("nan"), bits.to(tl.uint16).to(tl.bfloat16, bitcast=True))
    else:
        y = x.to(tl.float32)
    tl.store(dst_ptr + offs, y, mask=mask)


def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`x.to(dtype)`: one Triton pass for contiguous fp32 <-> bf16 (rounding to nearest even, as torch does)."""
    if x.dtype == dtype:
        return x
    pair = {x.dtype, dtype} == {torch.float32, torch.bfloat16}
    if not pair or not backend.use_triton(x) or not x.is_contiguous():
        return x.to(dtype)
    out = torch.empty_like(x, dtype=dtype)
    _cast_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK, num_warps=8)
    return out


class _CastWeight(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, dtype):
        ctx.w_dtype = w.dtype
        return cast(w, dtype)

    @staticmethod
    def backward(ctx, grad):
        return cast(grad.contiguous(), ctx.w_dtype), None


def cast_weight(w: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`w.to(dtype)` for a weight, differentiable: its gradient comes back in w's dtype through the same pass.
    No-op where w already has the dtype (FSDP hands out bf16 weights)."""
    return w if w.dtype == dtype else _CastWeight.apply(w, dtype)
