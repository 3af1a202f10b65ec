"""SwiGLU on the experts' fused gate/up projection: h = silu(gate) * up, gate_up = [gate | up] on the last dim.

Shapes: N rows (routed copies), I expert FFN width; gate_up_N2I holds gate in columns [0, I), up in [I, 2I)
(the layout of `Qwen3MoeExperts.gate_up_proj`, split by `chunk(2, -1)`).

Eager `F.silu(gate) * up` runs two kernels forward and keeps three [N, I] tensors for backward: the
gate and up views (which pin gate_up) and silu(gate), a fresh [N, I] activation; its backward runs
silu's backward and two products, then copies grad gate and grad up into a new [N, 2I] tensor for
the `chunk`. Here the forward is one pass (read gate_up, write h, math in fp32), autograd keeps
only gate_up, and the backward is one pass that recomputes sigmoid(gate) and writes
grad gate_up in place: no silu activation kept, no concat copy.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from pithtrain.operators import backend

BLOCK = 1024


def swiglu_reference(gate_up_N2I: torch.Tensor) -> torch.Tensor:
    gate_NI, up_NI = gate_up_N2I.chunk(2, dim=-1)
    return F.silu(gate_NI) * up_NI


@triton.jit
def _swiglu_fwd_kernel(gate_up_ptr, h_ptr, numel, I, BLOCK: tl.constexpr):
    """Flat over h's N*I elements; element (row, col) reads gate_up[row, col] and gate_up[row, I + col]."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    gate_offs = (offs // I) * (2 * I) + offs % I
    gate = tl.load(gate_up_ptr + gate_offs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_up_ptr + gate_offs + I, mask=mask, other=0.0).to(tl.float32)
    tl.store(h_ptr + offs, (gate * tl.sigmoid(gate) * up).to(h_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_bwd_kernel(gate_up_ptr, grad_h_ptr, grad_gate_up_ptr, numel, I, BLOCK: tl.constexpr):
    """d up = dh * silu(gate); d gate = dh * up * sigmoid(gate) * (1 + gate * (1 - sigmoid(gate)))."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    gate_offs = (offs // I) * (2 * I) + offs % I
    gate = tl.load(gate_up_ptr + gate_offs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_up_ptr + gate_offs + I, mask=mask, other=0.0).to(tl.float32)
    grad_h = tl.load(grad_h_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    sig = tl.sigmoid(gate)
    grad_gate = grad_h * up * sig * (1.0 + gate * (1.0 - sig))
    out_ty = grad_gate_up_ptr.dtype.element_ty
    tl.store(grad_gate_up_ptr + gate_offs, grad_gate.to(out_ty), mask=mask)
    tl.store(grad_gate_up_ptr + gate_offs + I, (grad_h * gate * sig).to(out_ty), mask=mask)


class SwiGLU(torch.autograd.Function):
    """Triton forward and backward; saves only gate_up (the backward recomputes sigmoid(gate))."""

    @staticmethod
    def forward(ctx, gate_up_N2I):
        assert gate_up_N2I.shape[-1] % 2 == 0, f"gate_up's last dim must be even, got {gate_up_N2I.shape}"
        gate_up_N2I = gate_up_N2I.contiguous()
        ctx.save_for_backward(gate_up_N2I)
        h_NI = gate_up_N2I.new_empty(*gate_up_N2I.shape[:-1], gate_up_N2I.shape[-1] // 2)
        if h_NI.numel():
            grid = (triton.cdiv(h_NI.numel(), BLOCK),)
            _swiglu_fwd_kernel[grid](gate_up_N2I, h_NI, h_NI.numel(), h_NI.shape[-1], BLOCK=BLOCK)
        return h_NI

    @staticmethod
    def backward(ctx, grad_h_NI):
        (gate_up_N2I,) = ctx.saved_tensors
        grad_gate_up_N2I = torch.empty_like(gate_up_N2I)
        if grad_h_NI.numel():
            grid = (triton.cdiv(grad_h_NI.numel(), BLOCK),)
            grad_h_NI, I = grad_h_NI.contiguous(), grad_h_NI.shape[-1]
            _swiglu_bwd_kernel[grid](gate_up_N2I, grad_h_NI, grad_gate_up_N2I, grad_h_NI.numel(), I, BLOCK=BLOCK)
        return grad_gate_up_N2I


def swiglu_triton(gate_up_N2I: torch.Tensor) -> torch.Tensor:
    return SwiGLU.apply(gate_up_N2I)


def swiglu(gate_up_N2I: torch.Tensor) -> torch.Tensor:
    if backend.use_triton(gate_up_N2I):
        return swiglu_triton(gate_up_N2I)
    else:
        return swiglu_reference(gate_up_N2I)
