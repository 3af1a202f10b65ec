"""Token permutation between token order and expert-contiguous order (MoE stages 2 and 4 on one rank).

Shapes: T tokens, K experts per token, D hidden, E experts, N = T*K routed copies.
`permute_tokens` gathers each (token, k) copy into a buffer sorted by expert, so a grouped matmul
can run each expert on a contiguous slice; `unpermute_tokens` scatters the expert outputs back to
(token, k) order. Both are plain indexing, so autograd gives the inverse scatter/gather as backward.
These two, and `combine_tokens_reference` (unpermute, weight, sum over K), are the eager oracle.

Triton path (`permute_tokens_triton`, `combine_tokens_triton`; `*_fast` picks it on CUDA):
- Combine. Eager `unpermute_tokens` + `(y_TKD * w_TK).sum(1)` writes y_TKD (a full copy of the
  expert outputs), then a weighted [T, K, D] product, then reads it again for the sum, and autograd
  keeps y_TKD for the weights' gradient. `_combine_kernel` reads each expert row once and writes
  y_TD = sum_k w_TK * y_N[inverse[t*K+k]] directly, accumulating in fp32; its backward is one pass
  over the expert rows that writes grad y_ND in expert order and grad w_TK as row dot products.
- Permute. The gather itself is cheap either way; the gain is the backward: eager `index_select`
  backward is an `index_add_` of K copies per token (atomics on GPU, run-to-run nondeterministic).
  Here it is `_combine_kernel` unweighted: each token sums its K rows through the inverse
  permutation, deterministic and atomic-free.
The routing metadata (stable argsort, counts) stays in PyTorch for both paths, without host syncs.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from pithtrain.operators import backend


@dataclass
class Permutation:
    """How routed copies were ordered: `order[n]` is the flat (token*K + k) index of sorted row n."""

    order_N: torch.Tensor
    tokens_per_expert_E: torch.Tensor
    top_k: int


def count_ids(ids: torch.Tensor, n: int) -> torch.Tensor:
    """How often each of 0 .. n-1 occurs in ids (int64 [n]): `torch.bincount` without its host sync (on CUDA it
    reads max(ids) back to size its output, which stalls the CPU once per MoE layer)."""
    ids = ids.reshape(-1)
    return torch.zeros(n, dtype=torch.int64, device=ids.device).scatter_add_(0, ids, torch.ones_like(ids))


def sort_by_expert(topk_ids_TK: torch.Tensor, num_experts: int) -> Permutation:
    """A stable sort of the routed copies by expert keeps token order inside an expert."""
    order_N = torch.argsort(topk_ids_TK.reshape(-1), stable=True)
    tokens_per_expert_E = count_ids(topk_ids_TK, num_experts)
    return Permutation(order_N, tokens_per_expert_E, topk_ids_TK.shape[1])


def permute_tokens(x_TD: torch.Tensor, topk_ids_TK: torch.Tensor, num_experts: int):
    """Return (x_ND sorted by expert, Permutation)."""
    perm = sort_by_expert(topk_ids_TK, num_experts)
    return x_TD.index_select(0, perm.order_N // perm.top_k), perm


def unpermute_tokens(y_ND: torch.Tensor, perm: Permutation) -> torch.Tensor:
    """Inverse of `permute_tokens` for the expert outputs: returns y_TKD in (token, k) order."""
    y_ND = permute_rows(y_ND, inverse_order(perm.order_N), perm.order_N)
    return y_ND.view(-1, perm.top_k, y_ND.shape[-1])


def inverse_order(order_N: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """inverse[order[n]] = n: the sorted row that holds flat copy token*K + k; -1 for the flat slots (of
    `size`, default N) that no row holds."""
    inverse_N = torch.full((order_N.numel() if size is None else size,), -1, dtype=order_N.dtype, device=order_N.device)
    inverse_N[order_N] = torch.arange(order_N.numel(), device=order_N.device)
    return inverse_N


class PermuteRows(torch.autograd.Function):
    """x[index] for a permutation `index` whose inverse is given. Autograd's backward of index_select is an
    index_add_ (atomic adds on GPU, slow in bf16); a permutation's backward is just the inverse gather."""

    @staticmethod
    def forward(ctx, x, index, inverse):
        ctx.save_for_backward(inverse)
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        (inverse,) = ctx.saved_tensors
        return grad.index_select(0, inverse), None, None


def permute_rows(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    return PermuteRows.apply(x, index, inverse)


def combine_tokens_reference(y_ND: torch.Tensor, perm: Permutation, topk_w_TK: torch.Tensor) -> torch.Tensor:
    """y_TD = sum_k w_TK * y_TKD, in the expert outputs' dtype (the math of the model's stage 5)."""
    return (unpermute_tokens(y_ND, perm) * topk_w_TK[..., None].to(y_ND.dtype)).sum(1)


# ---- Triton kernels: one program per output row, looping over D in blocks ----


@triton.jit
def _permute_kernel(
    src_ptr,
    dst_ptr,
    order_ptr,
    w_ptr,
    y_ptr,
    grad_w_ptr,
    D: tl.constexpr,
    TOP_K: tl.constexpr,
    WEIGHTED: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """dst[n] = src[order[n] // TOP_K]. WEIGHTED (the combine's backward, src = grad y_TD):
    dst[n] *= w[order[n]] and grad_w[order[n]] = <src[order[n] // TOP_K], y[n]>."""
    n = tl.program_id(0).to(tl.int64)
    flat = tl.load(order_ptr + n)
    src_row = src_ptr + (flat // TOP_K) * D
    if WEIGHTED:
        w = tl.load(w_ptr + flat).to(tl.float32)
        dot = tl.zeros([BLOCK_D], dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        offs = d0 + tl.arange(0, BLOCK_D)
        mask = offs < D
        row = tl.load(src_row + offs, mask=mask, other=0.0)
        if WEIGHTED:
            row = row.to(tl.float32)
            dot += row * tl.load(y_ptr + n * D + offs, mask=mask, other=0.0).to(tl.float32)
            row = row * w
        tl.store(dst_ptr + n * D + offs, row.to(dst_ptr.dtype.element_ty), mask=mask)
    if WEIGHTED:
        tl.store(grad_w_ptr + flat, tl.sum(dot, axis=0))


@triton.jit
def _combine_kernel(
    src_ptr,
    dst_ptr,
    inverse_ptr,
    w_ptr,
    D: tl.constexpr,
    TOP_K: tl.constexpr,
    WEIGHTED: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """dst[t] = sum_k w[t*TOP_K + k] * src[inverse[t*TOP_K + k]] over k with inverse >= 0, w = 1 unless WEIGHTED;
    fp32 sums."""
    t = tl.program_id(0).to(tl.int64)
    for d0 in range(0, D, BLOCK_D):
        offs = d0 + tl.arange(0, BLOCK_D)
        mask = offs < D
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for k in tl.static_range(TOP_K):
            n = tl.load(inverse_ptr + t * TOP_K + k)  # -1: no row for this (token, k), so load nothing
            row = tl.load(src_ptr + n * D + offs, mask=offs < tl.where(n >= 0, D, 0), other=0.0).to(tl.float32)
            if WEIGHTED:
                row = row * tl.load(w_ptr + t * TOP_K + k).to(tl.float32)
            acc += row
        tl.store(dst_ptr + t * D + offs, acc.to(dst_ptr.dtype.element_ty), mask=mask)


def _block_d(D: int) -> int:
    return min(triton.next_power_of_2(max(D, 1)), 2048)


def _permute(src_TD, order_N, top_k, w_N=None, y_ND=None):
    """Launch `_permute_kernel`; with w_N and y_ND the weighted form. Returns (dst_ND, grad_w_N fp32)."""
    D, weighted = src_TD.shape[1], w_N is not None
    dst_ND = src_TD.new_empty(order_N.numel(), D)
    grad_w_N = torch.zeros(order_N.numel(), dtype=torch.float32, device=src_TD.device)
    w_N, y_ND = (w_N, y_ND) if weighted else (grad_w_N, src_TD)  # the unweighted form never reads them
    if dst_ND.numel():
        grid = (order_N.numel(),)
        _permute_kernel[grid](
            src_TD, dst_ND, order_N, w_N, y_ND, grad_w_N, D, TOP_K=top_k, WEIGHTED=weighted, BLOCK_D=_block_d(D)
        )
    return dst_ND, grad_w_N


def _combine(src_ND, inverse_N, top_k, w_N=None):
    """Launch `_combine_kernel`: (T, D) rows, each the (weighted) sum of its K expert rows."""
    D, weighted = src_ND.shape[1], w_N is not None
    dst_TD = src_ND.new_empty(inverse_N.numel() // top_k, D)
    w_N = w_N if weighted else src_ND  # the unweighted form never reads it
    if dst_TD.numel():
        grid = (dst_TD.shape[0],)
        _combine_kernel[grid](src_ND, dst_TD, inverse_N, w_N, D, TOP_K=top_k, WEIGHTED=weighted, BLOCK_D=_block_d(D))
    return dst_TD


class PermuteTokens(torch.autograd.Function):
    """x_ND = x_TD[order // K] (order may skip some (token, k) slots); backward sums each token's gradient rows
    (no atomics)."""

    @staticmethod
    def forward(ctx, x_TD, order_N, top_k: int):
        ctx.save_for_backward(order_N)
        ctx.top_k, ctx.num_slots = top_k, x_TD.shape[0] * top_k
        return _permute(x_TD.contiguous(), order_N, top_k)[0]

    @staticmethod
    def backward(ctx, grad_x_ND):
        (order_N,) = ctx.saved_tensors
        return _combine(grad_x_ND.contiguous(), inverse_order(order_N, ctx.num_slots), ctx.top_k), None, None


class CombineTokens(torch.autograd.Function):
    """y_TD = sum_k w_TK * y_ND[inverse[t*K + k]]; backward writes grad y_ND in expert order and grad w_TK."""

    @staticmethod
    def forward(ctx, y_ND, topk_w_TK, order_N):
        y_ND, w_N = y_ND.contiguous(), topk_w_TK.contiguous().view(-1)
        ctx.save_for_backward(y_ND, w_N, order_N)
        ctx.w_shape, ctx.w_dtype = topk_w_TK.shape, topk_w_TK.dtype
        return _combine(y_ND, inverse_order(order_N), topk_w_TK.shape[1], w_N)

    @staticmethod
    def backward(ctx, grad_y_TD):
        y_ND, w_N, order_N = ctx.saved_tensors
        grad_y_ND, grad_w_N = _permute(grad_y_TD.contiguous(), order_N, ctx.w_shape[1], w_N, y_ND)
        return grad_y_ND, grad_w_N.view(ctx.w_shape).to(ctx.w_dtype), None


def permute_tokens_triton(x_TD: torch.Tensor, topk_ids_TK: torch.Tensor, num_experts: int):
    """`permute_tokens` with the Triton gather: returns (x_ND, Permutation)."""
    perm = sort_by_expert(topk_ids_TK, num_experts)
    return PermuteTokens.apply(x_TD, perm.order_N, perm.top_k), perm


def combine_tokens_triton(y_ND: torch.Tensor, perm: Permutation, topk_w_TK: torch.Tensor) -> torch.Tensor:
    """`combine_tokens_reference` in one kernel: y_TD in y_ND's dtype, summed in fp32."""
    return CombineTokens.apply(y_ND, topk_w_TK, perm.order_N)


def gather_tokens_fast(x_TD: torch.Tensor, order_N: torch.Tensor, top_k: int) -> torch.Tensor:
    """x_ND[n] = x_TD[order[n] // top_k], where order holds distinct (token * top_k + k) slots, not necessarily
    all: the expert-parallel dispatch's gathers. The backward sums each token's rows without atomics."""
    if backend.use_triton(x_TD):
        return PermuteTokens.apply(x_TD, order_N, top_k)
    else:
        return x_TD.index_select(0, order_N // top_k)


def permute_tokens_fast(x_TD: torch.Tensor, topk_ids_TK: torch.Tensor, num_experts: int):
    if backend.use_triton(x_TD):
        return permute_tokens_triton(x_TD, topk_ids_TK, num_experts)
    else:
        return permute_tokens(x_TD, topk_ids_TK, num_experts)


def combine_tokens_fast(y_ND: torch.Tensor, perm: Permutation, topk_w_TK: torch.Tensor) -> torch.Tensor:
    if backend.use_triton(y_ND):
        return combine_tokens_triton(y_ND, perm, topk_w_TK)
    else:
        return combine_tokens_reference(y_ND, perm, topk_w_TK)
