"""Token permutation between token order and expert-contiguous order (MoE stages 2 and 4 on one rank).

Shapes: T tokens, K experts per token, D hidden, E experts, N = T*K routed copies.
`permute_tokens` gathers each (token, k) copy into a buffer sorted by expert, so a grouped matmul
can run each expert on a contiguous slice; `unpermute_tokens` scatters the expert outputs back to
(token, k) order. Both are plain indexing, so autograd gives the inverse scatter/gather as backward;
they are the eager oracle. The routing weights are applied by the model's stage 5, eagerly.

Triton path (`permute_tokens_triton`, `gather_tokens_fast`; `*_fast` picks it on CUDA): the gather itself is
cheap either way; the gain is the backward: eager `index_select` backward is an `index_add_` of K copies per
token (atomics on GPU, run-to-run nondeterministic). Here `_combine_kernel` sums each token's K rows through
the inverse permutation, deterministic and atomic-free. The routing metadata (stable argsort, counts) stays in
PyTorch for both paths, without host syncs.
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


# ---- Triton kernels: one program per output row, looping over D in blocks ----


@triton.jit
def _permute_kernel(src_ptr, dst_ptr, order_ptr, D: tl.constexpr, TOP_K: tl.constexpr, BLOCK_D: tl.constexpr):
    """dst[n] = src[order[n] // TOP_K]."""
    n = tl.program_id(0).to(tl.int64)
    src_row = src_ptr + (tl.load(order_ptr + n) // TOP_K) * D
    for d0 in range(0, D, BLOCK_D):
        offs = d0 + tl.arange(0, BLOCK_D)
        mask = offs < D
        tl.store(dst_ptr + n * D + offs, tl.load(src_row + offs, mask=mask, other=0.0), mask=mask)


@triton.jit
def _combine_kernel(src_ptr, dst_ptr, inverse_ptr, D: tl.constexpr, TOP_K: tl.constexpr, BLOCK_D: tl.constexpr):
    """dst[t] = sum_k src[inverse[t*TOP_K + k]] over k with inverse >= 0; fp32 sums."""
    t = tl.program_id(0).to(tl.int64)
    for d0 in range(0, D, BLOCK_D):
        offs = d0 + tl.arange(0, BLOCK_D)
        mask = offs < D
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for k in tl.static_range(TOP_K):
            n = tl.load(inverse_ptr + t * TOP_K + k)  # -1: no row for this (token, k), so load nothing
            acc += tl.load(src_ptr + n * D + offs, mask=offs < tl.where(n >= 0, D, 0), other=0.0).to(tl.float32)
        tl.store(dst_ptr + t * D + offs, acc.to(dst_ptr.dtype.element_ty), mask=mask)


def _block_d(D: int) -> int:
    return min(triton.next_power_of_2(max(D, 1)), 2048)


def _permute(src_TD, order_N, top_k):
    """Launch `_permute_kernel`: dst_ND[n] = src_TD[order[n] // top_k]."""
    D = src_TD.shape[1]
    dst_ND = src_TD.new_empty(order_N.numel(), D)
    if dst_ND.numel():
        _permute_kernel[(order_N.numel(),)](src_TD, dst_ND, order_N, D, TOP_K=top_k, BLOCK_D=_block_d(D))
    return dst_ND


def _combine(src_ND, inverse_N, top_k):
    """Launch `_combine_kernel`: (T, D) rows, each the sum of its K expert rows."""
    D = src_ND.shape[1]
    dst_TD = src_ND.new_empty(inverse_N.numel() // top_k, D)
    if dst_TD.numel():
        _combine_kernel[(dst_TD.shape[0],)](src_ND, dst_TD, inverse_N, D, TOP_K=top_k, BLOCK_D=_block_d(D))
    return dst_TD


class PermuteTokens(torch.autograd.Function):
    """x_ND = x_TD[order // K] (order may skip some (token, k) slots); backward sums each token's gradient rows
    (no atomics)."""

    @staticmethod
    def forward(ctx, x_TD, order_N, top_k: int):
        ctx.save_for_backward(order_N)
        ctx.top_k, ctx.num_slots = top_k, x_TD.shape[0] * top_k
        return _permute(x_TD.contiguous(), order_N, top_k)

    @staticmethod
    def backward(ctx, grad_x_ND):
        (order_N,) = ctx.saved_tensors
        return _combine(grad_x_ND.contiguous(), inverse_order(order_N, ctx.num_slots), ctx.top_k), None, None


def permute_tokens_triton(x_TD: torch.Tensor, topk_ids_TK: torch.Tensor, num_experts: int):
    """`permute_tokens` with the Triton gather: returns (x_ND, Permutation)."""
    perm = sort_by_expert(topk_ids_TK, num_experts)
    return PermuteTokens.apply(x_TD, perm.order_N, perm.top_k), perm


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
