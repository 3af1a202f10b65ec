"""MoE stages 2 (dispatch) and 4 (combine): local permutation on one rank, deduplicated all-to-all under EP.

Shapes: T local tokens, K experts per token, D hidden, R EP ranks, E_l experts per rank, S rows sent
(one per (token, destination rank) pair), N routed copies that land on this rank's experts.
Deduplication: a token routed to several experts on the same rank crosses the wire once, with a
K-wide list of which local experts want it, and is fanned out on arrival. The combine sends back one
row per routed copy, in the order the source rank can place without any extra metadata.
"""

from dataclasses import dataclass

import torch
import torch.distributed as dist

from pithtrain.contexts import distributed
from pithtrain.operators.token_permute import (
    Permutation,
    count_ids,
    gather_tokens_fast,
    inverse_order,
    permute_rows,
    permute_tokens_fast,
    unpermute_tokens,
)


class AllToAll(torch.autograd.Function):
    """Differentiable all_to_all_single with uneven splits; backward is the reverse exchange."""

    @staticmethod
    def forward(ctx, x, out_splits: list[int], in_splits: list[int], group):
        ctx.out_splits, ctx.in_splits, ctx.group = out_splits, in_splits, group
        out = x.new_empty((sum(out_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        grad_in = grad_out.new_empty((sum(ctx.in_splits), *grad_out.shape[1:]))
        dist.all_to_all_single(grad_in, grad_out.contiguous(), ctx.in_splits, ctx.out_splits, group=ctx.group)
        return grad_in, None, None, None


def exchange(x: torch.Tensor, out_splits: list[int], in_splits: list[int]) -> torch.Tensor:
    return AllToAll.apply(x, out_splits, in_splits, distributed.ep_group)


@dataclass
class DispatchPlan:
    """What combine needs to send expert outputs back to where the tokens came from."""

    num_tokens: int
    top_k: int
    sort_N: torch.Tensor  # expert order -> arrival (row, k) order
    pairs_from_rank: list[int]  # routed copies that arrived from each rank
    pairs_to_rank: list[int]  # routed copies this rank sent to each rank
    pair_order: torch.Tensor  # source side: (rank, token, k) order -> flat token*K + k


def positions_of(mask: torch.Tensor, count: int) -> torch.Tensor:
    """Flat indices of mask's True entries in row-major order (`mask.reshape(-1).nonzero()`), given their count:
    no host sync, where `nonzero` reads the count back to size its output."""
    flat = mask.reshape(-1)
    slot = torch.where(flat, torch.cumsum(flat, 0) - 1, count)  # False entries go to a spare slot, dropped
    index = torch.arange(flat.numel(), device=flat.device)
    return torch.empty(count + 1, dtype=index.dtype, device=flat.device).scatter_(0, slot, index)[:count]


def dispatch(n_TD: torch.Tensor, topk_ids_TK: torch.Tensor, num_experts: int):
    """Stage 2. Returns (x_ND sorted by local expert, tokens_per_expert, plan for `combine`). One host sync: the
    split sizes of the exchange, which `all_to_all_single` needs on the host."""
    if distributed.ep_size == 1:
        x_ND, perm = permute_tokens_fast(n_TD, topk_ids_TK, num_experts)
        return x_ND, perm.tokens_per_expert_E, perm
    (T, K), R = topk_ids_TK.shape, distributed.ep_size
    E_l = num_experts // R
    # Which token goes to which rank (once per rank), with the local expert ids it wants there.
    dest_TK = topk_ids_TK // E_l
    wants_TR = torch.zeros(T, R, dtype=torch.bool, device=topk_ids_TK.device).scatter_(1, dest_TK, True)
    counts_out = torch.stack([wants_TR.sum(0), count_ids(dest_TK, R)], 1)  # rows, routed copies to each rank
    counts_in = torch.empty_like(counts_out)
    dist.all_to_all_single(counts_in, counts_out, group=distributed.ep_group)
    (rows_out, pairs_to_rank), (rows_in, pairs_from_rank) = torch.stack([counts_out.T, counts_in.T]).tolist()
    flat_S = positions_of(wants_TR.T, sum(rows_out))  # sent rows sorted by rank, then token
    rank_S, token_S = flat_S // T, flat_S % T
    local_ids_SK = torch.where(dest_TK[token_S] == rank_S[:, None], topk_ids_TK[token_S] - rank_S[:, None] * E_l, -1)
    x_RD = exchange(gather_tokens_fast(n_TD, token_S * R + rank_S, R), rows_in, rows_out)
    local_ids_RK = local_ids_SK.new_empty((sum(rows_in), K))
    dist.all_to_all_single(local_ids_RK, local_ids_SK, rows_in, rows_out, group=distributed.ep_group)
    # Fan out on arrival: one routed copy per (row, k) that names a local expert, then sort by expert.
    flat_N = positions_of(local_ids_RK >= 0, sum(pairs_from_rank))  # row * K + k
    expert_N = local_ids_RK.reshape(-1)[flat_N]
    sort_N = torch.argsort(expert_N, stable=True)
    x_ND = gather_tokens_fast(x_RD, flat_N[sort_N], K)
    plan = DispatchPlan(
        num_tokens=T,
        top_k=K,
        sort_N=sort_N,
        pairs_from_rank=pairs_from_rank,
        pairs_to_rank=pairs_to_rank,
        pair_order=torch.argsort(dest_TK.reshape(-1), stable=True),  # (rank, token, k): the order pairs return in
    )
    return x_ND, count_ids(expert_N, E_l), plan


def combine(y_ND: torch.Tensor, plan) -> torch.Tensor:
    """Stage 4. Expert outputs back to their tokens: y_TKD, each token's output from each of its experts."""
    if isinstance(plan, Permutation):
        return unpermute_tokens(y_ND, plan)
    y_pairs = exchange(
        permute_rows(y_ND, inverse_order(plan.sort_N), plan.sort_N), plan.pairs_to_rank, plan.pairs_from_rank
    )
    y_ND = permute_rows(y_pairs, inverse_order(plan.pair_order), plan.pair_order)
    return y_ND.view(plan.num_tokens, plan.top_k, -1)
