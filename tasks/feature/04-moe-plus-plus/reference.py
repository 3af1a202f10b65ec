"""MoE++ expert mix (arXiv 2410.07348): zero, copy and constant experts beside the FFN experts, and the gating
residual. Our eager reference, written from the paper's equations.

The op every framework must expose for this task (`artifacts/feature.json` names it):

    moepp_expert_mix(x, logits, prev_logits, residual_weight, ffn_out, const_vectors, const_gate_weight,
                     top_k: int, num_zero: int, num_copy: int) -> (y, routed_logits)
    x: [T, D]; logits: [T, E] (this layer's router logits W x); prev_logits: [T, E] (the previous layer's
    routed_logits) or None in the first MoE layer; residual_weight: [E, E] (W_g); ffn_out: [T, F, D] (every FFN
    expert's output for every token, computed by the caller); const_vectors: [C, D] (v); const_gate_weight:
    [C, 2, D] (W_c); y: [T, D]; routed_logits: [T, E].

Experts are ordered F FFN experts, then num_zero zero experts, num_copy copy experts and C constant experts
(E = F + num_zero + num_copy + C; the task's split is 60 + 1 + 1 + 2). Gating residual:
routed_logits = logits + prev_logits W_g^T. Routing: p = softmax(routed_logits), the top_k experts by p with
their probabilities as weights (not renormalised). Expert outputs: FFN e -> ffn_out[:, e]; zero -> 0; copy -> x;
constant c -> a1 x + a2 v_c with [a1, a2] = softmax(W_c x).
Shape legend: T tokens, D hidden, E experts, F FFN experts, C constant experts, K top-k.
"""

import torch


def moepp_expert_mix_reference(
    x, logits, prev_logits, residual_weight, ffn_out, const_vectors, const_gate_weight, top_k, num_zero, num_copy
):
    acc = torch.promote_types(x.dtype, torch.float32)  # float32 math for bf16/fp16 inputs, float64 kept
    T, D = x.shape
    F_ = ffn_out.shape[1]
    C = const_vectors.shape[0]
    routed_TE = (
        logits.to(acc) if prev_logits is None else logits.to(acc) + prev_logits.to(acc) @ residual_weight.to(acc).T
    )
    assert routed_TE.shape[-1] == F_ + num_zero + num_copy + C

    a_TC2 = torch.einsum("td,cjd->tcj", x.to(acc), const_gate_weight.to(acc)).softmax(-1)
    const_TCD = a_TC2[..., :1] * x.to(acc)[:, None, :] + a_TC2[..., 1:] * const_vectors.to(acc)[None]
    outputs_TED = torch.cat(
        [
            ffn_out.to(acc),
            torch.zeros(T, num_zero, D, dtype=acc, device=x.device),
            x.to(acc)[:, None, :].expand(T, num_copy, D),
            const_TCD,
        ],
        dim=1,
    )
    weights_TK, ids_TK = routed_TE.softmax(-1).topk(top_k, dim=-1)
    chosen_TKD = outputs_TED.gather(1, ids_TK[..., None].expand(T, top_k, D))
    y_TD = (weights_TK[..., None] * chosen_TKD).sum(1)
    return y_TD.to(x.dtype), routed_TE


def moepp_ffn_weights_reference(routed_logits, top_k):
    """The top_k experts of p = softmax(routed_logits) over all experts and their probabilities (not renormalised):
    (weights [T, K], ids [T, K]). A model that passes zeros for ffn_out weights each chosen FFN expert (id < F) by
    these; the zero-computation experts' share (ids >= F) is already in moepp_expert_mix's y."""
    acc = torch.promote_types(routed_logits.dtype, torch.float32)
    weights_TK, ids_TK = routed_logits.to(acc).softmax(-1).topk(top_k, dim=-1)
    return weights_TK, ids_TK
