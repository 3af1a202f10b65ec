"""feature-04 MoE++: the agent's moepp_expert_mix against reference.py (output and routed logits, forward and
gradients) on inputs where every expert kind is chosen, then training, what the model does with the op (called in
every MoE layer, the first without previous logits, 1 zero, 1 copy and 2 constant experts after the FFN ones, the
model's top-k, learnable W_g, v and W_c that receive gradients, both outputs used, no token's output dropped) and
liveness (feature_check.py). float32 only: routing is a discrete top-k."""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # feature_check.py
from feature_check import OpSpec, grad_probe, load_reference, main  # noqa: E402

moepp_expert_mix_reference = load_reference(HERE).moepp_expert_mix_reference
TOP_K = {"smoke": 2, "gpu1": 6, "paper": 6}  # num_experts_per_tok of each profile's provided model
KINDS = ("ffn", "zero", "copy", "constant 0", "constant 1")
LEARNED = ("residual_weight", "const_vectors", "const_gate_weight")


def chosen_kinds(logits, prev_logits, residual_weight, num_ffn, top_k) -> dict[str, int]:
    """How many top-k slots each expert kind gets (experts: FFN, 1 zero, 1 copy, 2 constant), and how many tokens
    get no FFN expert at all ("only zero-computation")."""
    routed = (
        logits.double() if prev_logits is None else logits.double() + prev_logits.double() @ residual_weight.double().T
    )
    ids = routed.softmax(-1).topk(top_k, dim=-1).indices
    kind = torch.bucketize(
        ids, torch.tensor([num_ffn, num_ffn + 1, num_ffn + 2, num_ffn + 3], device=ids.device), right=True
    )
    counts = {name: int((kind == i).sum()) for i, name in enumerate(KINDS)}
    return {**counts, "only zero-computation": int((kind > 0).all(-1).sum())}


def make_inputs(gen, dtype):
    """32 tokens, 6 FFN experts + 1 zero + 1 copy + 2 constant, top-2; tokens 0-3 lean (+8 on their logit) to the
    zero, copy and constant experts, token 4 to both constant experts, so every kind is chosen and one token has no
    FFN expert; the gating residual stays small beside +8."""
    T, D, F, C = 32, 16, 6, 2
    E = F + 1 + 1 + C
    x = torch.randn(T, D, generator=gen)
    logits, prev_logits = torch.randn(T, E, generator=gen), torch.randn(T, E, generator=gen)
    for t, e in ((0, F), (1, F + 1), (2, F + 2), (3, F + 3), (4, F + 2), (4, F + 3)):
        logits[t, e] += 8.0
    residual_weight = 0.1 * torch.randn(E, E, generator=gen)
    ffn_out = torch.randn(T, F, D, generator=gen)
    const_vectors = torch.randn(C, D, generator=gen)
    const_gate_weight = torch.randn(C, 2, D, generator=gen)
    kinds = chosen_kinds(logits.to(dtype), prev_logits.to(dtype), residual_weight.to(dtype), F, 2)
    assert min(kinds.values()) >= 1, kinds  # every check reaches every rule
    args = [x, logits, prev_logits, residual_weight, ffn_out, const_vectors, const_gate_weight]
    return [t.to(dtype).requires_grad_() for t in args], {"top_k": 2, "num_zero": 1, "num_copy": 1}


def record_call(record, op, a, out):
    record["top_k"], record["num_zero"], record["num_copy"] = int(a["top_k"]), int(a["num_zero"]), int(a["num_copy"])
    record["ffn"], record["constant"] = a["ffn_out"].shape[1], a["const_vectors"].shape[0]
    record["experts"], record["first_layer"] = a["logits"].shape[-1], a["prev_logits"] is None
    for key in LEARNED if a["prev_logits"] is not None else LEARNED[1:]:
        grad_probe(record, key, a[key])
    grad_probe(record, "y", out[0])
    grad_probe(record, "routed_logits", out[1])
    record["chosen"] = chosen_kinds(
        a["logits"].detach(), a["prev_logits"], a["residual_weight"].detach(), record["ffn"], record["top_k"]
    )


def judge_calls(calls, profile):
    problems = []
    split = {(c["num_zero"], c["num_copy"], c["constant"], c["experts"] - c["ffn"]) for c in calls}
    if split != {(1, 1, 2, 4)}:
        problems.append(
            f"the model's (zero, copy, constant, zero-computation) experts are {sorted(split)}; the task says "
            "(1, 1, 2, 4)"
        )
    if {c["top_k"] for c in calls} != {TOP_K[profile]}:
        problems.append(f"the model routes top-{sorted({c['top_k'] for c in calls})}; its top-k is {TOP_K[profile]}")
    if {c["first_layer"] for c in calls} != {True, False}:
        problems.append(
            "the model's MoE layers do not both start without previous logits (the first) and add the gating "
            "residual (the others)"
        )
    for key in LEARNED:
        with_key = [c for c in calls if key in c]
        if not with_key or not all(c[key] for c in with_key):
            problems.append(f"the {key} the model passes does not require grad: it cannot learn")
        elif not max(c[f"{key}_grad"] for c in with_key) > 0:
            problems.append(f"no gradient reached {key} in any call")
    for key in ("y", "routed_logits"):
        if not max(c[f"{key}_grad"] for c in calls) > 0:
            problems.append(f"no gradient reached the op's {key}: the model does not use it")
    dropped = max((c["y_zero_rows"] or 0) for c in calls)
    if dropped:
        problems.append(f"{dropped} tokens' y got no gradient in one call: the model drops the op's output for them")
    totals = {k: sum(c["chosen"][k] for c in calls) for k in KINDS}
    if min(totals.values()) == 0:
        problems.append(
            f"on the model's own tokens, some expert kind was never chosen ({totals}): the run did not reach every rule"
        )
    return problems


SPEC = OpSpec(
    moepp_expert_mix_reference, make_inputs, {torch.float32: 1e-4}, lambda out: list(out), record_call, judge_calls
)

if __name__ == "__main__":
    sys.exit(main(SPEC, __file__))
