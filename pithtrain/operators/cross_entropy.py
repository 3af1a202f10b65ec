"""Output head + cross-entropy, summed over tokens, a chunk of tokens at a time, gradients formed in the forward.

Shapes: T tokens, D hidden, V vocab, C tokens per chunk.

Eager `F.cross_entropy(F.linear(h, W).float(), labels, reduction="sum")` materialises the logits for
every token at once: [T, V] in the input dtype, an fp32 copy, and softmax's fp32 output kept for
backward; for Qwen3 (V = 151,936) and T = 16K tokens that is about 10 GB per fp32 copy, and about ten
passes over [T, V] in fp32 (cast, max, exp, sum, log, then in backward exp, subtract, scale, cast).

Here the loss is the last thing the model computes, so its gradient with respect to the logits,
softmax - onehot(label), is known in the forward, up to the scalar that backward brings. Each chunk of C
tokens does: logits_CV = h_CD W^T (one matmul); one row kernel that reads the logits twice (max and
sum of exp, then softmax - onehot) and overwrites them with their gradient; grad h_CD = grad_CV W and
grad W += grad_CV^T h_CD (accumulated in fp32 inside the matmul). Backward only scales the stored
grad h and grad W. Three head matmuls per token instead of four (no recomputation), no fp32 [C, V]
copies, and only grad h, grad W and one fp32 loss per token held between forward and backward.
W may be fp32 master weights: it is cast to h's dtype for the matmuls and its gradient comes back in
W's dtype, summed in fp32 (no bf16 rounding of the head's weight gradient).

With fp8 (training.precision = "fp8"), the logits and grad h matmuls run block-scaled FP8 through cuBLAS
(operators/fp8_linear.py: h and the logits' gradient 1x128, W 128x128 from the per-step weight cache); measured
rates: benchmarks/NOTES.md, "Operator rates moved from docstrings". grad W stays a bf16 matmul summed in fp32,
the products' exactness costing least there.

`_ce_rows_kernel` (Triton) and `ce_rows_reference` (PyTorch, fp32 softmax) are the two row steps; the
reference is what runs on CPU. `linear_cross_entropy_reference` is the eager oracle.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from pithtrain.operators import backend
from pithtrain.operators.fp8_linear import matmul_quantized_weight, quantized_weight

IGNORE_INDEX = -100


def linear_cross_entropy_reference(h_TD: torch.Tensor, W_VD: torch.Tensor, labels_T: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(F.linear(h_TD, W_VD).float(), labels_T, ignore_index=IGNORE_INDEX, reduction="sum")


def ce_rows_reference(logits_CV: torch.Tensor, labels_C: torch.Tensor) -> torch.Tensor:
    """Per-token loss (fp32, 0 for ignored tokens); overwrites logits_CV with softmax - onehot (0 rows if ignored)."""
    valid_C = labels_C != IGNORE_INDEX
    safe_C = torch.where(valid_C, labels_C, 0)
    logits32_CV = logits_CV.float()
    lse_C = torch.logsumexp(logits32_CV, dim=-1)
    loss_C = torch.where(valid_C, lse_C - logits32_CV.gather(1, safe_C[:, None]).squeeze(1), 0.0)
    grad_CV = logits32_CV.sub_(lse_C[:, None]).exp_()
    grad_CV[torch.arange(len(labels_C), device=grad_CV.device), safe_C] -= 1.0
    logits_CV.copy_(grad_CV.mul_(valid_C[:, None]))
    return loss_C


@triton.jit
def _ce_rows_kernel(
    logits_ptr, labels_ptr, loss_ptr, stride, V: tl.constexpr, IGNORE: tl.constexpr, BLOCK_V: tl.constexpr
):
    """One program per token: online max / sum of exp over the row in fp32, then the row becomes its gradient."""
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * stride
    label = tl.load(labels_ptr + row).to(tl.int64)
    running_max = tl.full([BLOCK_V], float("-inf"), tl.float32)
    running_sum = tl.zeros([BLOCK_V], tl.float32)
    for v0 in range(0, V, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        x = tl.load(base + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(running_max, x)
        # Lanes that have seen only -inf keep sum 0 (exp of -inf - -inf would be nan).
        scale = tl.where(new_max == float("-inf"), 0.0, tl.exp(running_max - new_max))
        running_sum = running_sum * scale + tl.where(x == float("-inf"), 0.0, tl.exp(x - new_max))
        running_max = new_max
    row_max = tl.max(running_max, axis=0)
    lse = row_max + tl.log(tl.sum(running_sum * tl.exp(running_max - row_max), axis=0))
    valid = label != IGNORE
    safe = tl.where(valid, label, 0)
    target = tl.load(base + safe).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - target, 0.0))
    for v0 in range(0, V, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        x = tl.load(base + cols, mask=cols < V, other=0.0).to(tl.float32)
        g = tl.exp(x - lse) - tl.where(cols == safe, 1.0, 0.0)
        g = tl.where(valid, g, 0.0)
        tl.store(base + cols, g.to(logits_ptr.dtype.element_ty), mask=cols < V)


def ce_rows_triton(logits_CV: torch.Tensor, labels_C: torch.Tensor) -> torch.Tensor:
    C, V = logits_CV.shape
    assert logits_CV.stride(1) == 1, "rows must be contiguous"
    loss_C = torch.empty(C, dtype=torch.float32, device=logits_CV.device)
    if C:
        block_v = min(triton.next_power_of_2(V), 4096)
        _ce_rows_kernel[(C,)](
            logits_CV, labels_C, loss_C, logits_CV.stride(0), V=V, IGNORE=IGNORE_INDEX, BLOCK_V=block_v, num_warps=8
        )
    return loss_C


def ce_rows(logits_CV: torch.Tensor, labels_C: torch.Tensor) -> torch.Tensor:
    if backend.use_triton(logits_CV):
        return ce_rows_triton(logits_CV, labels_C)
    else:
        return ce_rows_reference(logits_CV, labels_C)


def accumulate_weight_grad(grad_W_VD: torch.Tensor, grad_CV: torch.Tensor, h_CD: torch.Tensor, first: bool) -> None:
    """grad_W_VD (fp32) += grad_CV^T h_CD, summed in fp32 inside the matmul on CUDA (bf16 products are not
    rounded per chunk); on CPU the operands are promoted first."""
    if grad_W_VD.is_cuda:
        if first:
            torch.mm(grad_CV.t(), h_CD, out_dtype=torch.float32, out=grad_W_VD)
        else:
            torch.addmm(grad_W_VD, grad_CV.t(), h_CD, out_dtype=torch.float32, out=grad_W_VD)
    else:
        grad_W_VD.addmm_(grad_CV.t().float(), h_CD.float(), beta=0.0 if first else 1.0)


class LinearCrossEntropy(torch.autograd.Function):
    """Sum of token cross-entropies of logits h_TD @ W_VD^T, C tokens at a time; label -100 is ignored."""

    @staticmethod
    def forward(ctx, h_TD, W_VD, labels_T, chunk_size: int, fp8: bool):
        assert h_TD.dim() == 2 and labels_T.shape == h_TD.shape[:1], f"h {h_TD.shape}, labels {labels_T.shape}"
        if fp8:
            q_VD, s_VbDb, q_DV, s_DbVb = quantized_weight(W_VD)
        else:
            Wc_VD = W_VD.to(h_TD.dtype)
        need_h, need_W = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_h_TD = torch.empty_like(h_TD) if need_h else None
        grad_W_VD = torch.empty(W_VD.shape, dtype=torch.float32, device=W_VD.device) if need_W else None
        loss = torch.zeros((), dtype=torch.float32, device=h_TD.device)
        for s in range(0, h_TD.shape[0], chunk_size):
            h_CD = h_TD[s : s + chunk_size]
            logits_CV = matmul_quantized_weight(h_CD, q_VD, s_VbDb) if fp8 else h_CD @ Wc_VD.t()
            loss += ce_rows(logits_CV, labels_T[s : s + chunk_size]).sum()  # logits_CV now holds d loss / d logits
            if need_h and fp8:
                grad_h_TD[s : s + chunk_size] = matmul_quantized_weight(logits_CV, q_DV, s_DbVb)
            elif need_h:
                grad_h_TD[s : s + chunk_size] = logits_CV @ Wc_VD
            if need_W:
                accumulate_weight_grad(grad_W_VD, logits_CV, h_CD, first=s == 0)
        if need_W and h_TD.shape[0] == 0:
            grad_W_VD.zero_()
        ctx.save_for_backward(grad_h_TD, grad_W_VD)
        ctx.W_dtype = W_VD.dtype
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        grad_h_TD, grad_W_VD = ctx.saved_tensors
        grad_h = None if grad_h_TD is None else (grad_h_TD.float() * grad_loss).to(grad_h_TD.dtype)
        grad_W = None if grad_W_VD is None else (grad_W_VD * grad_loss).to(ctx.W_dtype)
        return grad_h, grad_W, None, None, None


def linear_cross_entropy(
    h_TD: torch.Tensor, W_VD: torch.Tensor, labels_T: torch.Tensor, chunk_size: int = 8192, fp8: bool = False
):
    """Summed cross-entropy of `F.linear(h_TD, W_VD)` (in h's dtype) against labels_T (-100 ignored), an fp32
    scalar, never holding more than chunk_size tokens' logits (8,192 x Qwen3's 151,936: 2.5 GB in bf16; fewer,
    larger chunks save fp32 re-reads of grad W: one `mm` and one `addmm` per 16K tokens instead of one and three,
    and `addmm` is the slower of the two: benchmarks/NOTES.md). fp8: h bf16, and T, D, V and chunk_size
    multiples of 128."""
    return LinearCrossEntropy.apply(h_TD, W_VD, labels_T, chunk_size, fp8)
