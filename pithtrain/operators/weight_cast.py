"""A weight used in a lower precision than it is stored in (fp32 experts in bf16 grouped matmuls), with its
gradient cast back to fp32 at memory speed.

torch casts bf16 to fp32 on CUDA through its dynamic-casting copy, one element per thread: in the 8-layer profile
(benchmarks/NOTES.md) the experts' gradients came back at about 1.4 TB/s, twice the time of the forward's
fp32 -> bf16 cast of the same weights, which torch vectorises (about 4.4 TB/s). One Triton pass does the upcast
at the bandwidth of the downcast; the downcast stays torch's.

Shapes: any; the Triton pass takes contiguous tensors (others go through `Tensor.to`).
"""

import torch
import triton
import triton.language as tl

from pithtrain.operators import backend

BLOCK = 4096


@triton.jit
def _upcast_kernel(src_ptr, dst_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask).to(tl.float32), mask=mask)


def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`x.to(dtype)`; a contiguous bf16 -> fp32 cast in one Triton pass."""
    if x.dtype == dtype:
        return x
    if (x.dtype, dtype) != (torch.bfloat16, torch.float32) or not backend.use_triton(x) or not x.is_contiguous():
        return x.to(dtype)
    out = torch.empty_like(x, dtype=dtype)
    _upcast_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK, num_warps=8)
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
