"""Deduplicated EP dispatch against a plain one (every routed copy sent on its own) in 2 gloo processes: the
experts receive the same rows in the same order, combine returns every copy to its token, and a token bound
for several experts on one rank crosses the wire once."""

import torch
import torch.distributed as dist
from distributed_helpers import run_in_processes

from pithtrain.contexts import distributed
from pithtrain.modules import expert_parallel


def test_sync_free_index_helpers_match_nonzero_and_bincount():
    """The dispatch's index building without host syncs: positions_of = nonzero, count_ids = bincount."""
    gen = torch.Generator().manual_seed(0)
    for shape in [(0, 3), (7, 1), (33, 4)]:
        mask = torch.rand(shape, generator=gen) < 0.4
        got = expert_parallel.positions_of(mask, int(mask.sum()))
        assert torch.equal(got, mask.reshape(-1).nonzero().squeeze(1)), shape
    ids = torch.randint(0, 9, (50, 4), generator=gen)
    assert torch.equal(expert_parallel.count_ids(ids, 12), torch.bincount(ids.reshape(-1), minlength=12))


def plain_dispatch(n_TD, topk_ids_TK, experts_per_rank):
    """Each (token, k) copy sent to its expert's rank, no deduplication; rows arrive sorted by local expert."""
    T, K = topk_ids_TK.shape
    dest_N = (topk_ids_TK // experts_per_rank).reshape(-1)
    order = torch.argsort(dest_N, stable=True)
    send_counts = torch.bincount(dest_N, minlength=distributed.ep_size)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    x = n_TD.repeat_interleave(K, 0)[order]
    ids = topk_ids_TK.reshape(-1)[order]
    x_in = x.new_empty(int(recv_counts.sum()), x.shape[1])
    ids_in = ids.new_empty(int(recv_counts.sum()))
    dist.all_to_all_single(x_in, x, recv_counts.tolist(), send_counts.tolist())
    dist.all_to_all_single(ids_in, ids, recv_counts.tolist(), send_counts.tolist())
    local = ids_in - distributed.rank * experts_per_rank
    sort = torch.argsort(local, stable=True)
    return x_in[sort], torch.bincount(local, minlength=experts_per_rank), int(send_counts.sum())


def compare(rank, world_size):
    distributed.ep_size, distributed.ep_rank, distributed.rank = world_size, rank, rank
    distributed.ep_group = dist.group.WORLD
    E, T, K, D = 8, 12, 3, 5
    g = torch.Generator().manual_seed(rank)
    n_TD = torch.randn(T, D, generator=g, requires_grad=True)
    # Top-k distinct experts per token, chosen so that most tokens send two copies to one rank.
    topk_ids_TK = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)])

    x_ND, tokens_per_expert, plan = expert_parallel.dispatch(n_TD, topk_ids_TK, E)
    x_plain, tokens_plain, copies_sent = plain_dispatch(n_TD.detach(), topk_ids_TK, E // world_size)
    rows_sent = int(
        torch.zeros(T, world_size, dtype=torch.bool).scatter_(1, topk_ids_TK // (E // world_size), True).sum()
    )

    # Sorting by local expert keeps arrival order inside an expert, which is (source rank, token) in both paths.
    assert torch.equal(x_ND, x_plain) and torch.equal(tokens_per_expert, tokens_plain)
    y_TKD = expert_parallel.combine(x_ND * 2, plan)  # a stand-in expert: doubling
    assert torch.equal(y_TKD, 2 * n_TD.detach()[:, None].expand(T, K, D))
    y_TKD.sum().backward()
    assert torch.equal(n_TD.grad, torch.full((T, D), 2.0 * K))
    return rows_sent, copies_sent


def test_deduplicated_dispatch_matches_plain_and_sends_less():
    for rows_sent, copies_sent in run_in_processes(compare, 2, timeout_s=120):
        assert rows_sent < copies_sent  # with K=3 of 8 experts on 2 ranks, duplicates are certain
