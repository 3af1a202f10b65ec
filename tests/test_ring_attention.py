"""Zigzag ring attention against single-process causal SDPA: 2 and 4 gloo ranks on CPU, forward and backward;
sliding windows and attention sinks (GPT-OSS) against an explicit single-process softmax."""

import functools
import time

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from distributed_helpers import run_in_processes

from pithtrain.modules.ring_attention import ring_attention, zigzag_gather, zigzag_positions, zigzag_split

B, H, G = 2, 4, 2
# (name, dtype, S, Dqk, Dv, tolerance on the relative norm of the difference); Dv != Dqk as in DeepSeek's MLA.
CASES = [
    ("fp64", torch.float64, 16, 8, 8, 1e-12),
    ("fp32", torch.float32, 24, 8, 8, 1e-5),
    ("fp64-mla", torch.float64, 24, 12, 8, 1e-12),
]


def make_inputs(dtype, S, Dqk, Dv, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(B, H, S, Dqk), (B, G, S, Dqk), (B, G, S, Dv), (B, H, S, Dv)]
    return [torch.randn(shape, generator=g, dtype=dtype) for shape in shapes]


def sdpa_with_grads(q, k, v, dout, attention):
    """attention(q, k, v) and the gradients of <out, dout> with respect to q, k, v."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = attention(q, k, v)
    out.backward(dout)
    return out.detach(), q.grad, k.grad, v.grad


def causal_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def rel_err(x, ref):
    return ((x.double() - ref.double()).norm() / ref.double().norm()).item()


def test_zigzag_positions_by_hand():
    assert zigzag_positions(8, 0, 2).tolist() == [0, 1, 6, 7]
    assert zigzag_positions(8, 1, 2).tolist() == [2, 3, 4, 5]
    assert zigzag_positions(8, 3, 4).tolist() == [3, 4]
    assert zigzag_positions(5, 0, 1).tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("cp_size", [1, 2, 4])
def test_zigzag_shards_cover_the_sequence_once(cp_size):
    x = torch.randn(3, 16, 5)
    pos = torch.cat([zigzag_positions(16, r, cp_size) for r in range(cp_size)])
    assert sorted(pos.tolist()) == list(range(16))
    shards = torch.cat([zigzag_split(x, 1, r, cp_size) for r in range(cp_size)], dim=1)
    assert torch.equal(shards, x[:, pos])


def test_zigzag_split_rejects_bad_input():
    with pytest.raises(ValueError, match="multiple of 2 \\* cp_size = 8"):
        zigzag_split(torch.zeros(12), 0, 0, 4)
    with pytest.raises(ValueError, match="cp_rank = 2"):
        zigzag_split(torch.zeros(12), 0, 2, 2)


@pytest.mark.parametrize("dtype,S,Dqk,Dv,tol", [(torch.float64, 13, 8, 8, 1e-12), (torch.float32, 7, 12, 8, 1e-5)])
def test_without_cp_equals_causal_sdpa(dtype, S, Dqk, Dv, tol):
    q, k, v, dout = make_inputs(dtype, S, Dqk, Dv)
    want = sdpa_with_grads(q, k, v, dout, causal_sdpa)
    got = sdpa_with_grads(q, k, v, dout, functools.partial(ring_attention, group=None))
    for name, x, ref in zip(["out", "dq", "dk", "dv"], got, want):
        assert x.dtype == dtype and rel_err(x, ref) < tol, name


def ring_vs_reference(rank, world_size):
    """On every CP group (the world; with 4 ranks also two interleaved pairs, so group and global ranks differ):
    relative errors of this rank's output and gradient shards, and of the gathered output. {key: (err, tol)}."""
    groups = [("world", dist.group.WORLD)]
    if world_size == 4:
        pairs = [dist.new_group([0, 2]), dist.new_group([1, 3])]  # every rank must create every group
        groups.append(("pairs", pairs[rank % 2]))
    errors = {}
    for group_name, group in groups:
        cp_rank, cp_size = dist.get_rank(group), dist.get_world_size(group)
        for case, dtype, S, Dqk, Dv, tol in CASES:
            full = make_inputs(dtype, S, Dqk, Dv)
            want = sdpa_with_grads(*(t.double() for t in full), causal_sdpa)
            local = [zigzag_split(t, 2, cp_rank, cp_size) for t in full]
            got = sdpa_with_grads(*local, functools.partial(ring_attention, group=group))
            for name, x, ref in zip(["out", "dq", "dk", "dv"], got, want):
                assert x.dtype == dtype
                errors[f"{group_name}/{case}/{name}"] = (rel_err(x, zigzag_split(ref, 2, cp_rank, cp_size)), tol)
            errors[f"{group_name}/{case}/gathered out"] = (rel_err(zigzag_gather(got[0], 2, group), want[0]), tol)
            assert torch.equal(zigzag_gather(local[0], 2, group), full[0]), "split then gather is not the identity"
    return errors


@pytest.mark.parametrize("world_size", [2, 4])
def test_ring_attention_matches_single_process(world_size):
    per_rank = run_in_processes(ring_vs_reference, world_size, timeout_s=120)
    bad = [
        f"rank {r} {key}: {err:.1e} >= {tol}"
        for r, e in enumerate(per_rank)
        for key, (err, tol) in e.items()
        if err >= tol
    ]
    assert not bad, "\n".join(bad)


# (window, sinks): windows within a chunk, across a chunk boundary, over whole chunks, and none; S = 24 makes
# chunks of 6 on 2 ranks.
WINDOW_SINK_CASES = [(1, True), (4, False), (9, True), (13, False), (None, True)]


def windowed_attention_with_sinks(q, k, v, sinks, window):
    """The oracle: scores masked to causal and to the last `window` keys, one sink logit per head appended to
    each row, softmax, the sink's column dropped (transformers' GPT-OSS eager attention, written out)."""
    B, H, S, Dqk = q.shape
    k, v = (t.repeat_interleave(H // k.shape[1], dim=1) for t in (k, v))
    lag = torch.arange(S)[:, None] - torch.arange(S)[None]
    allowed = (lag >= 0) & (lag < (window or S))
    s = (q @ k.transpose(-2, -1) * Dqk**-0.5).masked_fill(~allowed, float("-inf"))
    if sinks is not None:
        s = torch.cat((s, sinks.view(1, H, 1, 1).expand(B, H, S, 1)), dim=-1)
    return s.softmax(-1)[..., :S] @ v


def with_grads(attention, dout, *inputs):
    """attention(*inputs) and the gradients of <out, dout> with respect to every input that is not None."""
    inputs = [None if t is None else t.detach().requires_grad_() for t in inputs]
    out = attention(*inputs)
    out.backward(dout)
    return [out.detach()] + [t.grad for t in inputs if t is not None]


def ring_attention_on(group, window):
    return lambda q, k, v, sinks: ring_attention(q, k, v, group, window=window, sinks_H=sinks)


def window_sink_inputs(with_sinks):
    q, k, v, dout = make_inputs(torch.float64, 24, 8, 8, seed=1)
    sinks = torch.randn(H, generator=torch.Generator().manual_seed(2), dtype=torch.float64) if with_sinks else None
    return q, k, v, sinks, dout


@pytest.mark.parametrize("window,with_sinks", WINDOW_SINK_CASES)
def test_window_and_sinks_without_cp_equal_reference(window, with_sinks):
    q, k, v, sinks, dout = window_sink_inputs(with_sinks)
    want = with_grads(functools.partial(windowed_attention_with_sinks, window=window), dout, q, k, v, sinks)

    got = with_grads(ring_attention_on(None, window), dout, q, k, v, sinks)
    for name, x, ref in zip(["out", "dq", "dk", "dv", "dsinks"], got, want):
        assert rel_err(x, ref) < 1e-12, name


def ring_window_sinks_vs_reference(rank, world_size):
    """Each (window, sinks) case on 2 ranks: this rank's shards of the output and q/k/v gradients, and the
    sinks' gradient (summed over ranks, as FSDP would), against the oracle. {key: relative error}."""
    errors = {}
    for window, with_sinks in WINDOW_SINK_CASES:
        q, k, v, sinks, dout = window_sink_inputs(with_sinks)
        want = with_grads(functools.partial(windowed_attention_with_sinks, window=window), dout, q, k, v, sinks)

        ring = ring_attention_on(dist.group.WORLD, window)
        local = [zigzag_split(t, 2, rank, world_size) for t in (q, k, v)]
        got = with_grads(ring, zigzag_split(dout, 2, rank, world_size), *local, sinks)
        for name, x, ref in zip(["out", "dq", "dk", "dv"], got, want):
            errors[f"window {window}, sinks {with_sinks}/{name}"] = rel_err(x, zigzag_split(ref, 2, rank, world_size))
        if with_sinks:
            dist.all_reduce(got[4])
            errors[f"window {window}, sinks {with_sinks}/dsinks"] = rel_err(got[4], want[4])
    return errors


def test_window_and_sinks_match_single_process():
    per_rank = run_in_processes(ring_window_sinks_vs_reference, 2, timeout_s=120)
    bad = [f"rank {r} {key}: {err:.1e}" for r, e in enumerate(per_rank) for key, err in e.items() if err >= 1e-12]
    assert not bad, "\n".join(bad)


def fail_on_rank_one(rank, world_size):
    if rank == 1:
        raise ArithmeticError("rank one fails on purpose")
    return rank


def test_run_in_processes_reports_the_failing_rank():
    with pytest.raises(RuntimeError, match="(?s)rank 1 failed:.*ArithmeticError: rank one fails on purpose"):
        run_in_processes(fail_on_rank_one, 2, timeout_s=30)


def hang(rank, world_size):
    time.sleep(600)


def test_run_in_processes_times_out_instead_of_hanging():
    with pytest.raises(TimeoutError, match=r"ranks \[0, 1\] gave no result within 4 s"):
        run_in_processes(hang, 2, timeout_s=4)
