"""DynMoE top-any gating (arXiv 2405.14297): our eager reference, written from the paper's equations.

The op every framework must expose for this task (`artifacts/feature.json` names it):

    dynmoe_gate(x, expert_vectors, thresholds, k_max: int) -> weights
    x: [T, D] tokens, expert_vectors: [E, D] (the gate's learnable expert representations),
    thresholds: [E] (learnable, initialised at 0); weights: [T, E], the combine weight of every expert.

A token's score for expert e is sigmoid(cos(x, w_e)); expert e is active when the score exceeds sigmoid(g_e),
the sigmoid of its threshold: a_e = sign(relu(sigmoid(cos) - sigmoid(g_e))), whose gradient is taken straight
through the sign (the derivative of relu(sigmoid(cos) - sigmoid(g_e))), so expert vectors and thresholds learn.
The active experts of a token share equal weights 1/k (k, the active count, carries no gradient); at most k_max
experts stay active (the k_max with the largest margin sigmoid(cos) - sigmoid(g_e)); a token with no active
expert falls back to its top-1 expert by score, with weight 1 and no gradient through the choice.
Shape legend: T tokens, D hidden, E experts.
"""

import torch
import torch.nn.functional as F


class _SignStraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, margin):
        return torch.sign(margin)

    @staticmethod
    def backward(ctx, grad):
        return grad


def dynmoe_gate_reference(x, expert_vectors, thresholds, k_max: int):
    acc = torch.promote_types(x.dtype, torch.float32)  # float32 math for bf16/fp16 inputs, float64 kept
    x, expert_vectors, thresholds = x.to(acc), expert_vectors.to(acc), thresholds.to(acc)
    score_TE = torch.sigmoid(F.normalize(x, dim=-1) @ F.normalize(expert_vectors, dim=-1).T)
    margin_TE = F.relu(score_TE - torch.sigmoid(thresholds))
    active_TE = _SignStraightThrough.apply(margin_TE)  # 0/1 forward, straight-through backward

    # Cap at k_max: keep the largest margins (ties between equal margins are improbable on real inputs).
    kept = margin_TE.detach().topk(min(k_max, margin_TE.shape[-1]), dim=-1).indices
    cap_TE = torch.zeros_like(margin_TE, dtype=torch.bool).scatter_(-1, kept, True)
    active_TE = active_TE * cap_TE

    k_T = (active_TE.detach() > 0).sum(-1, keepdim=True)
    fallback_TE = F.one_hot(score_TE.detach().argmax(-1), score_TE.shape[-1]).to(acc) * (k_T == 0)
    return active_TE / k_T.clamp(min=1) + fallback_TE


def dynmoe_aux_loss_reference(expert_vectors):
    """The auxiliary loss the task names (`artifacts/feature.json` "aux"): ||W^T W - I||^2 + mean_e ||w_e||^2, with
    W = expert_vectors^T [D, E] (one column per expert, so W^T W is the experts' [E, E] Gram) and ||.||^2 the sum of
    squares; a scalar."""
    w_ED = expert_vectors.to(torch.promote_types(expert_vectors.dtype, torch.float32))
    gram_EE = w_ED @ w_ED.T
    return (gram_EE - torch.eye(gram_EE.shape[0], dtype=w_ED.dtype)).pow(2).sum() + w_ED.pow(2).sum(-1).mean()
