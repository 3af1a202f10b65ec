"""MoBA, mixture of block attention (arXiv 2502.13189): our eager reference, written from the paper's equations.

The op every framework must expose for this task (`artifacts/feature.json` names it):

    moba_attention(q, k, v, block_size: int, top_k: int) -> o
    q, k: [B, S, H, Dqk] (after RoPE), v: [B, S, H, Dv]; o: [B, S, H, Dv]; softmax scale Dqk ** -0.5.

Keys are cut into blocks of `block_size` (the last may be short); a block's gate key is the mean of its keys;
a query scores each block by the dot product with that mean. Blocks after the query's own are excluded, the
query's own block is always selected, and the `top_k` best blocks (own block included) are kept. Attention is
one softmax over the selected blocks' tokens, causal inside the query's own block. With `top_k` at least the
number of blocks, MoBA is dense causal attention (tests/ate_bench/test_feature_references.py checks that identity).
Shape legend: B batch, S sequence, H heads, N blocks, D head size.
"""

import torch


def moba_attention_reference(q, k, v, block_size: int, top_k: int):
    acc = torch.promote_types(q.dtype, torch.float32)  # float32 math for bf16/fp16 inputs, float64 kept
    B, S, H, Dqk = q.shape
    N = -(-S // block_size)
    block_of_token_S = torch.arange(S, device=q.device) // block_size

    # Gate keys: the mean of each block's keys (the short last block averages what it has).
    sums_BNHD = torch.zeros(B, N, H, Dqk, dtype=acc, device=q.device)
    sums_BNHD.index_add_(1, block_of_token_S, k.to(acc))
    counts_N = torch.bincount(block_of_token_S, minlength=N).to(acc)
    mean_k_BNHD = sums_BNHD / counts_N[None, :, None, None]
    gate_BHSN = torch.einsum("bshd,bnhd->bhsn", q.to(acc), mean_k_BNHD)

    # Future blocks can never win, the own block always does; ties broken by block index through topk.
    own_SN = block_of_token_S[:, None] == torch.arange(N, device=q.device)[None, :]
    future_SN = block_of_token_S[:, None] < torch.arange(N, device=q.device)[None, :]
    gate_BHSN = gate_BHSN.masked_fill(future_SN, float("-inf")).masked_fill(own_SN, float("inf"))
    n_valid_S = block_of_token_S + 1  # blocks a query may see
    chosen_BHSK = gate_BHSN.topk(min(top_k, N), dim=-1).indices
    selected_BHSN = torch.zeros_like(gate_BHSN, dtype=torch.bool).scatter_(-1, chosen_BHSK, True)
    selected_BHSN &= ~future_SN  # a query with fewer than top_k visible blocks picks some future ones: drop them
    assert bool((selected_BHSN.sum(-1) == n_valid_S.clamp(max=top_k)).all())

    # Token mask: the selected blocks' keys, causal.
    allowed_BHSS = selected_BHSN[..., block_of_token_S]
    allowed_BHSS &= torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    scores_BHSS = torch.einsum("bshd,bthd->bhst", q.to(acc), k.to(acc)) * Dqk**-0.5
    probs_BHSS = scores_BHSS.masked_fill(~allowed_BHSS, float("-inf")).softmax(-1)
    o_BSHD = torch.einsum("bhst,bthd->bshd", probs_BHSS, v.to(acc))
    return o_BSHD.to(v.dtype)
