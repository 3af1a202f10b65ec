"""Differential attention (Differential Transformer, arXiv 2410.05258): our eager reference from the paper.

The op every framework must expose for this task (`artifacts/feature.json` names it):

    differential_attention(q1, k1, q2, k2, v, lambda_q1, lambda_k1, lambda_q2, lambda_k2,
                           lambda_init: float, norm_weight, eps: float) -> o
    q1, k1, q2, k2: [B, S, H, Dh] (the two halves of each head's queries and keys; for MLA each of them is the
    no-RoPE half and the RoPE half concatenated), v: [B, S, H, Dv] (shared), lambda_*: [Dh] (shared across the
    heads of a layer), norm_weight: [Dv]; o: [B, S, H, Dv].

    A_j = causal softmax(q_j k_j^T * Dh ** -0.5)
    lambda = exp(<lambda_q1, lambda_k1>) - exp(<lambda_q2, lambda_k2>) + lambda_init
    o = RMSNorm_per_head((A_1 - lambda A_2) v; norm_weight, eps) * (1 - lambda_init)

lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) for layer l, 1-based (`lambda_init_for_layer`).
Shape legend: B batch, S sequence, H heads, D head size.
"""

import math

import torch


def lambda_init_for_layer(layer_1based: int) -> float:
    return 0.8 - 0.6 * math.exp(-0.3 * (layer_1based - 1))


def differential_attention_reference(
    q1, k1, q2, k2, v, lambda_q1, lambda_k1, lambda_q2, lambda_k2, lambda_init: float, norm_weight, eps: float
):
    acc = torch.promote_types(q1.dtype, torch.float32)  # float32 math for bf16/fp16 inputs, float64 kept
    S, Dh = q1.shape[1], q1.shape[-1]
    causal_SS = torch.ones(S, S, dtype=torch.bool, device=q1.device).tril()

    def attention_probs(q_BSHD, k_BSHD):
        scores_BHSS = torch.einsum("bshd,bthd->bhst", q_BSHD.to(acc), k_BSHD.to(acc)) * Dh**-0.5
        return scores_BHSS.masked_fill(~causal_SS, float("-inf")).softmax(-1)

    lam = (
        torch.exp((lambda_q1.to(acc) * lambda_k1.to(acc)).sum())
        - torch.exp((lambda_q2.to(acc) * lambda_k2.to(acc)).sum())
        + lambda_init
    )
    probs_BHSS = attention_probs(q1, k1) - lam * attention_probs(q2, k2)
    o_BSHD = torch.einsum("bhst,bthd->bshd", probs_BHSS, v.to(acc))
    o_BSHD = o_BSHD * torch.rsqrt(o_BSHD.pow(2).mean(-1, keepdim=True) + eps) * norm_weight.to(acc)
    return (o_BSHD * (1 - lambda_init)).to(v.dtype)
