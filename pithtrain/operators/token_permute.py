"""Token permutation between token order and expert-contiguous order (MoE stages 2 and 4 on one rank).

Shapes: T tokens, K experts per token, D hidden, E experts, N = T*K routed copies.
`permute_tokens` gathers each (token, k) copy into a buffer sorted by expert, so a grouped matmul
can run each expert on a contiguous slice; `unpermute_tokens` scatters the expert outputs back to
(token, k) order. Both are plain indexing, so autograd gives the inverse scatter/gather as backward.
"""

from dataclasses import dataclass

import torch


@dataclass
class Permutation:
    """How routed copies were ordered: `order[n]` is the flat (token*K + k) index of sorted row n."""

    order_N: torch.Tensor
    tokens_per_expert_E: torch.Tensor
    top_k: int


def permute_tokens(x_TD: torch.Tensor, topk_ids_TK: torch.Tensor, num_experts: int):
    """Return (x_ND sorted by expert, Permutation). A stable sort keeps token order inside an expert."""
    top_k = topk_ids_TK.shape[1]
    order_N = torch.argsort(topk_ids_TK.reshape(-1), stable=True)
    tokens_per_expert_E = torch.bincount(topk_ids_TK.reshape(-1), minlength=num_experts)
    x_ND = x_TD.index_select(0, order_N // top_k)
    return x_ND, Permutation(order_N, tokens_per_expert_E, top_k)


def unpermute_tokens(y_ND: torch.Tensor, perm: Permutation) -> torch.Tensor:
    """Inverse of `permute_tokens` for the expert outputs: returns y_TKD in (token, k) order."""
    inverse_N = torch.empty_like(perm.order_N)
    inverse_N[perm.order_N] = torch.arange(perm.order_N.numel(), device=perm.order_N.device)
    y_ND = y_ND.index_select(0, inverse_N)
    return y_ND.view(-1, perm.top_k, y_ND.shape[-1])
