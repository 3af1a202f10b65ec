"""Context parallelism: causal attention over a sequence sharded across a CP group, K/V passed around a ring.

Each CP rank holds a shard of every sequence. Queries stay put; keys/values travel one hop per step around
the ring for cp_size steps, and each rank merges blockwise attention results with log-sum-exp (online
softmax) (Ring Attention, Liu et al. 2023, arXiv:2310.01889). With a contiguous split, causal masking makes
rank 0 idle and the last rank do all the work; the zigzag split (cut into 2*cp_size chunks, rank r keeps
chunks r and 2*cp_size-1-r: Llama 3, arXiv:2407.21783 sec. 3.3.2; zhuzilin/ring-flash-attention) gives every
rank the same number of unmasked blocks at every step. Backward recomputes the blocks (flash-attention style:
p = exp(s - lse), Dao 2023, arXiv:2307.08691 Alg. 2) and passes dK/dV around the ring back to their owners.

Which query chunk sees which key chunk is decided in one place, `_chunk_mask`: causal, and optionally within a
sliding window of global (zigzag) positions (GPT-OSS). Per-head attention sinks (GPT-OSS: a learned logit in
each row's softmax with no value behind it) add exp(sink) to the row's denominator only, so after the ring the
output is scaled by sigmoid(lse - sink) and the log-sum-exp becomes logaddexp(lse, sink); backward then runs
unchanged with that lse, and the sink's gradient is -sum(p_sink * rowsum(dO * O)).

Blocks are plain PyTorch matmuls in fp32 (fp64 for fp64 inputs), so the module runs on CPU and is its own
eager oracle; a fused kernel taking/returning the log-sum-exp would replace `_block_forward`
and `_block_backward`.

Shape legend: B batch, H query heads, G key/value heads, R = H/G query heads per kv head, S local sequence
(2 chunks when cp_size > 1), C chunk length, Dqk query/key head dim, Dv value head dim (differs from Dqk in
DeepSeek's MLA), N cp_size.
"""

import math

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

FULL, SKIP = "full", "skip"


def zigzag_split(x: torch.Tensor, dim: int, cp_rank: int, cp_size: int) -> torch.Tensor:
    """Rank cp_rank's shard of x along dim: chunks cp_rank and 2*cp_size-1-cp_rank of 2*cp_size, concatenated."""
    if not 0 <= cp_rank < cp_size:
        raise ValueError(f"cp_rank = {cp_rank} must lie in [0, cp_size = {cp_size}).")
    if cp_size == 1:
        return x
    if x.size(dim) % (2 * cp_size):
        raise ValueError(
            f"sequence length {x.size(dim)} must be a multiple of 2 * cp_size = {2 * cp_size} for the zigzag "
            "split; pad the sequence or change seq_len."
        )
    chunks = x.chunk(2 * cp_size, dim)
    return torch.cat((chunks[cp_rank], chunks[2 * cp_size - 1 - cp_rank]), dim)


def zigzag_positions(seq_len: int, cp_rank: int, cp_size: int, device=None) -> torch.Tensor:
    """Global position ids (S_local,) of rank cp_rank's tokens, for RoPE under the zigzag layout."""
    return zigzag_split(torch.arange(seq_len, device=device), 0, cp_rank, cp_size)


def zigzag_gather(x_local: torch.Tensor, dim: int, group: ProcessGroup | None) -> torch.Tensor:
    """Reassemble the full sequence from every rank's zigzag shard (all-gather; no autograd). group=None: no CP."""
    cp_size = 1 if group is None else dist.get_world_size(group)
    if cp_size == 1:
        return x_local
    x_local = x_local.contiguous()
    shards = [torch.empty_like(x_local) for _ in range(cp_size)]
    dist.all_gather(shards, x_local, group=group)
    chunks = [None] * (2 * cp_size)
    for rank, shard in enumerate(shards):
        chunks[rank], chunks[2 * cp_size - 1 - rank] = shard.chunk(2, dim)
    return torch.cat(chunks, dim)


def ring_attention(
    q_BHSD: torch.Tensor,
    k_BGSD: torch.Tensor,
    v_BGSD: torch.Tensor,
    group: ProcessGroup | None,
    scale: float | None = None,
    window: int | None = None,
    sinks_H: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention of the local zigzag shards q/k/v over the whole sequence of the CP group; returns the
    local output (B, H, S, Dv). G may divide H (grouped-query attention); v's head dim may differ from q/k's.
    window: each query sees only the `window` latest keys, itself included. sinks_H: one sink logit per head.
    group=None or a group of one: plain causal attention over the local sequence (equals causal SDPA)."""
    (B, H, S, Dqk), (Bk, G, Sk, Dk), (Bv, Gv, Sv, _) = q_BHSD.shape, k_BGSD.shape, v_BGSD.shape
    if (Bk, Sk, Dk) != (B, S, Dqk) or (Bv, Gv, Sv) != (B, G, S) or H % G:
        raise ValueError(
            f"ring_attention shapes q {tuple(q_BHSD.shape)}, k {tuple(k_BGSD.shape)}, v {tuple(v_BGSD.shape)}: "
            "want q (B, H, S, Dqk), k (B, G, S, Dqk), v (B, G, S, Dv) with G dividing H."
        )
    if window is not None and window < 1:
        raise ValueError(f"ring_attention window = {window} must be at least 1 (a query sees itself).")
    if sinks_H is not None and tuple(sinks_H.shape) != (H,):
        raise ValueError(f"ring_attention sinks shape {tuple(sinks_H.shape)}: want ({H},), one per query head.")
    ring = _Ring(group)
    if ring.size > 1 and S % 2:
        raise ValueError(f"local sequence length {S} must be even (two zigzag chunks) when cp_size > 1.")
    scale = 1.0 / math.sqrt(Dqk) if scale is None else scale
    with torch.autocast(q_BHSD.device.type, enabled=False):  # blocks accumulate in fp32, not autocast's bf16
        return _RingAttention.apply(q_BHSD, k_BGSD, v_BGSD, sinks_H, ring, scale, window)


class _Ring:
    """This rank's place in the CP ring: it sends to `send_to` and receives from `recv_from` (global ranks)."""

    def __init__(self, group: ProcessGroup | None):
        self.group = group
        self.rank = 0 if group is None else dist.get_rank(group)
        self.size = 1 if group is None else dist.get_world_size(group)
        if self.size > 1:
            self.send_to = dist.get_global_rank(group, (self.rank + 1) % self.size)
            self.recv_from = dist.get_global_rank(group, (self.rank - 1) % self.size)

    def chunk_ids(self, rank: int) -> list[int]:
        """Global chunk indices held by `rank`: the zigzag pair, or the whole sequence as one chunk without CP."""
        return [0] if self.size == 1 else [rank, 2 * self.size - 1 - rank]

    def exchange(self, tensors: tuple[torch.Tensor, ...]):
        """Start sending `tensors` one hop forward and receiving the previous rank's; returns (buffers, works).
        Every rank posts the same sequence of exchanges, so same-direction messages match in order."""
        recvs = tuple(torch.empty_like(t) for t in tensors)
        ops = [dist.P2POp(dist.isend, t, self.send_to, self.group) for t in tensors]
        ops += [dist.P2POp(dist.irecv, t, self.recv_from, self.group) for t in recvs]
        return recvs, dist.batch_isend_irecv(ops)


def _chunk_mask(q_chunk: int, k_chunk: int, chunk_len: int, window: int | None, device) -> str | torch.Tensor:
    """What queries of global chunk q_chunk see of keys in global chunk k_chunk: FULL, SKIP, or a bool (C, C)
    mask (True = attend). A query at position p sees keys at p - lag for 0 <= lag < window (window None: any
    lag >= 0). The one place to extend (document masks); a row that sees no key is allowed (its block lse is
    -inf and the merge ignores it)."""
    window = math.inf if window is None else window
    lag = (q_chunk - k_chunk) * chunk_len  # query position minus key position at the block's diagonal
    lo, hi = lag - (chunk_len - 1), lag + (chunk_len - 1)  # the smallest and largest lag in the block
    if hi < 0 or lo >= window:
        return SKIP
    if lo >= 0 and hi < window:
        return FULL
    idx = torch.arange(chunk_len, device=device)
    lag_CC = lag + idx[:, None] - idx[None]
    return (lag_CC >= 0) & (lag_CC < window)


def _unmasked_blocks(q_ids: list[int], k_ids: list[int], chunk_len: int, window: int | None, device):
    """(i, j, mask) for every local query chunk i and held key chunk j whose block is not skipped."""
    for i, q_id in enumerate(q_ids):
        for j, k_id in enumerate(k_ids):
            mask = _chunk_mask(q_id, k_id, chunk_len, window, device)
            if mask is not SKIP:
                yield i, j, mask


def _wait(works) -> None:
    for work in works:
        work.wait()


def _finite(lse: torch.Tensor) -> torch.Tensor:
    """lse with -inf (rows that see nothing) replaced by 0, so exp(s - lse) gives 0 there instead of nan."""
    return lse.masked_fill(lse == -math.inf, 0.0)


def _scores(q_BGRCD, k_BGCD, mask, scale):
    s_BGRCC = torch.einsum("bgrqd,bgkd->bgrqk", q_BGRCD, k_BGCD) * scale
    return s_BGRCC if mask is FULL else s_BGRCC.masked_fill(~mask, -math.inf)


def _block_forward(q_BGRCD, k_BGCD, v_BGCD, mask, scale):
    """One query chunk over one key chunk: the block-normalised output and its log-sum-exp (B, G, R, C)."""
    s_BGRCC = _scores(q_BGRCD, k_BGCD, mask, scale)
    lse_BGRC = torch.logsumexp(s_BGRCC, dim=-1)
    p_BGRCC = torch.exp(s_BGRCC - _finite(lse_BGRC)[..., None])
    return torch.einsum("bgrqk,bgkd->bgrqd", p_BGRCC, v_BGCD), lse_BGRC


def _merge(o_BGRCD, lse_BGRC, o_blk_BGRCD, lse_blk_BGRC):
    """Online softmax: combine two partial results normalised over disjoint key sets."""
    lse_new = torch.logaddexp(lse_BGRC, lse_blk_BGRC)
    ref = _finite(lse_new)[..., None]
    o = o_BGRCD * torch.exp(lse_BGRC[..., None] - ref) + o_blk_BGRCD * torch.exp(lse_blk_BGRC[..., None] - ref)
    return o, lse_new


def _block_backward(q_BGRCD, k_BGCD, v_BGCD, do_BGRCD, lse_BGRC, delta_BGRC, mask, scale):
    """Gradients of one block given the final lse and delta = rowsum(dO * O): (dq, dk, dv) of the block."""
    p_BGRCC = torch.exp(_scores(q_BGRCD, k_BGCD, mask, scale) - _finite(lse_BGRC)[..., None])
    dv_BGCD = torch.einsum("bgrqk,bgrqd->bgkd", p_BGRCC, do_BGRCD)
    dp_BGRCC = torch.einsum("bgrqd,bgkd->bgrqk", do_BGRCD, v_BGCD)
    ds_BGRCC = p_BGRCC * (dp_BGRCC - delta_BGRC[..., None]) * scale
    dq_BGRCD = torch.einsum("bgrqk,bgkd->bgrqd", ds_BGRCC, k_BGCD)
    dk_BGCD = torch.einsum("bgrqk,bgrqd->bgkd", ds_BGRCC, q_BGRCD)
    return dq_BGRCD, dk_BGCD, dv_BGCD


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q_BHSD, k_BGSD, v_BGSD, sinks_H, ring: _Ring, scale: float, window: int | None):
        acc, G = _acc_dtype(q_BHSD.dtype), k_BGSD.shape[1]
        k_BGSD, v_BGSD = k_BGSD.contiguous(), v_BGSD.contiguous()  # sent as they are
        q_ids = ring.chunk_ids(ring.rank)
        q_chunks = q_BHSD.unflatten(1, (G, -1)).to(acc).chunk(len(q_ids), dim=3)
        o_chunks, lse_chunks = [None] * len(q_ids), [None] * len(q_ids)
        kv = (k_BGSD, v_BGSD)
        for step in range(ring.size):
            # Phase 1: start moving K/V one hop while this step's blocks compute.
            if step + 1 < ring.size:
                kv_next, works = ring.exchange(kv)
            # Phase 2: blocks of the local queries against the K/V that rank (rank - step) owns.
            k_ids = ring.chunk_ids((ring.rank - step) % ring.size)
            k_chunks, v_chunks = (t.to(acc).chunk(len(k_ids), dim=2) for t in kv)
            for i, j, mask in _unmasked_blocks(q_ids, k_ids, k_chunks[0].shape[2], window, q_BHSD.device):
                o_blk, lse_blk = _block_forward(q_chunks[i], k_chunks[j], v_chunks[j], mask, scale)
                if o_chunks[i] is None:
                    o_chunks[i], lse_chunks[i] = o_blk, lse_blk
                else:
                    o_chunks[i], lse_chunks[i] = _merge(o_chunks[i], lse_chunks[i], o_blk, lse_blk)
            if step + 1 < ring.size:
                _wait(works)
                kv = kv_next
        assert all(o is not None for o in o_chunks), "a query chunk saw no key chunk (its diagonal is always seen)"
        out_BGRSD, lse_BGRS = torch.cat(o_chunks, dim=3), torch.cat(lse_chunks, dim=3)
        if sinks_H is not None:  # the sink joins each row's denominator: Z -> Z + exp(sink)
            lse_with_sink_BGRS = torch.logaddexp(lse_BGRS, sinks_H.to(acc).view(1, G, -1, 1))
            out_BGRSD = out_BGRSD * torch.exp(lse_BGRS - lse_with_sink_BGRS)[..., None]
            lse_BGRS = lse_with_sink_BGRS
        out_BHSD = out_BGRSD.flatten(1, 2).to(q_BHSD.dtype)
        ctx.save_for_backward(q_BHSD, k_BGSD, v_BGSD, out_BHSD, lse_BGRS, sinks_H)
        ctx.ring, ctx.scale, ctx.window = ring, scale, window
        return out_BHSD

    @staticmethod
    def backward(ctx, dout_BHSD):
        q_BHSD, k_BGSD, v_BGSD, out_BHSD, lse_BGRS, sinks_H = ctx.saved_tensors
        ring, scale, window = ctx.ring, ctx.scale, ctx.window
        acc, G = _acc_dtype(q_BHSD.dtype), k_BGSD.shape[1]
        q_ids = ring.chunk_ids(ring.rank)
        n = len(q_ids)
        q_BGRSD = q_BHSD.unflatten(1, (G, -1)).to(acc)
        do_BGRSD = dout_BHSD.unflatten(1, (G, -1)).to(acc)
        delta_BGRS = (do_BGRSD * out_BHSD.unflatten(1, (G, -1)).to(acc)).sum(-1)
        q_chunks, do_chunks = q_BGRSD.chunk(n, dim=3), do_BGRSD.chunk(n, dim=3)
        lse_chunks, delta_chunks = lse_BGRS.chunk(n, dim=3), delta_BGRS.chunk(n, dim=3)
        dq_BGRSD = torch.zeros_like(q_BGRSD)
        dq_chunks = dq_BGRSD.chunk(n, dim=3)
        kv, dkv, dkv_works = (k_BGSD, v_BGSD), None, None
        for step in range(ring.size):
            # Phase 1: start moving K/V one hop (as in forward).
            if step + 1 < ring.size:
                kv_next, kv_works = ring.exchange(kv)
            # Phase 2: this rank's contribution to dQ and to dK/dV of the K/V it holds.
            k_ids = ring.chunk_ids((ring.rank - step) % ring.size)
            k_chunks, v_chunks = (t.to(acc).chunk(len(k_ids), dim=2) for t in kv)
            dk_BGSD = torch.zeros(kv[0].shape, dtype=acc, device=kv[0].device)
            dv_BGSD = torch.zeros(kv[1].shape, dtype=acc, device=kv[1].device)
            dk_chunks, dv_chunks = dk_BGSD.chunk(len(k_ids), dim=2), dv_BGSD.chunk(len(k_ids), dim=2)
            for i, j, mask in _unmasked_blocks(q_ids, k_ids, k_chunks[0].shape[2], window, q_BHSD.device):
                dq, dk, dv = _block_backward(
                    q_chunks[i], k_chunks[j], v_chunks[j], do_chunks[i], lse_chunks[i], delta_chunks[i], mask, scale
                )
                dq_chunks[i].add_(dq)
                dk_chunks[j].add_(dk)
                dv_chunks[j].add_(dv)
            # Phase 3: add what earlier ranks accumulated for this K/V and pass the sum on; after the last
            # step one more hop lands each dK/dV on the rank that owns that K/V.
            if dkv_works is not None:
                _wait(dkv_works)
                dk_BGSD += dkv[0]
                dv_BGSD += dkv[1]
            if ring.size > 1:
                dkv, dkv_works = ring.exchange((dk_BGSD, dv_BGSD))
            else:
                dkv = (dk_BGSD, dv_BGSD)
            if step + 1 < ring.size:
                _wait(kv_works)
                kv = kv_next
        if dkv_works is not None:
            _wait(dkv_works)
        dq_BHSD = dq_BGRSD.flatten(1, 2).to(q_BHSD.dtype)
        dsinks_H = None
        if sinks_H is not None:  # d out / d sink = -p_sink * out, so d loss / d sink = -p_sink * rowsum(dO * O)
            p_sink_BGRS = torch.exp(sinks_H.to(acc).view(1, G, -1, 1) - lse_BGRS)
            dsinks_H = -(p_sink_BGRS * delta_BGRS).sum((0, 3)).flatten().to(sinks_H.dtype)
        return dq_BHSD, dkv[0].to(k_BGSD.dtype), dkv[1].to(v_BGSD.dtype), dsinks_H, None, None, None
