"""feature-02 DynMoE: the agent's dynmoe_gate against reference.py (forward and the straight-through gradients) on
inputs that reach every rule (a token with no active expert, a token above the cap), then training, what the model
does with the op (thresholds start at 0, learn, and receive gradients; k_max 12; the op's weights are used, every
active expert's) and
liveness (feature_check.py); and the auxiliary loss the instruction names (feature.json "aux") against reference.py,
called by the model, which trains on it (a gradient reaches its value). float32 only: activation is a discrete
threshold test."""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # feature_check.py
from feature_check import OpSpec, grad_probe, load_reference, main, replay_error  # noqa: E402

reference = load_reference(HERE)
dynmoe_gate_reference, dynmoe_aux_loss_reference = reference.dynmoe_gate_reference, reference.dynmoe_aux_loss_reference
K_MAX = 12  # the instruction's k_max
FAR = 4.0  # thresholds at -FAR make every expert active (sigmoid(cos) >= 0.27 > 0.018), at +FAR none (<= 0.73 < 0.98)


def branches(x, expert_vectors, thresholds, k_max) -> tuple[int, int]:
    """(tokens with no active expert, tokens with more than k_max): the fallback and the cap rules at work."""
    score = torch.sigmoid(F.normalize(x.double(), dim=-1) @ F.normalize(expert_vectors.double(), dim=-1).T)
    active = (score > torch.sigmoid(thresholds.double())).sum(-1)
    return int((active == 0).sum()), int((active > k_max).sum())


def make_inputs(gen, dtype):
    """64 tokens, 16 experts, k_max 4. Token 1 leans towards every expert vector, token 0 is its negation; each
    threshold sits midway between the two tokens' scores (0.01 or more from both) or above both: token 0 activates
    nothing (the fallback), token 1 the experts where it scores higher, more than k_max of them (the cap); the
    other 62 tokens fall where they fall."""
    x = torch.randn(64, 32, generator=gen, dtype=torch.float64)
    expert_vectors = torch.randn(16, 32, generator=gen, dtype=torch.float64)
    x[1] = F.normalize(expert_vectors, dim=-1).sum(0) + 0.1 * x[1]
    x[0] = -x[1]
    score = torch.sigmoid(F.normalize(x[:2], dim=-1) @ F.normalize(expert_vectors, dim=-1).T)
    wins = score[1] > score[0] + 0.02
    level = torch.where(wins, (score[0] + score[1]) / 2, torch.maximum(score[0], score[1]) + 0.01)
    thresholds = torch.logit(level.clamp(max=0.99))
    fallback, capped = branches(x.to(dtype), expert_vectors.to(dtype), thresholds.to(dtype), 4)
    assert fallback >= 1 and capped >= 1, (fallback, capped)  # every check reaches both rules
    tensors = [t.to(dtype).requires_grad_() for t in (x, expert_vectors, thresholds)]
    return tensors, {"k_max": 4}


# The aux loss must take the gate's own expert vectors (revision 4): each side is recorded by a fingerprint of its
# values (shape up to a transpose, sum, sum of squares), and an aux call is matched with a gate call either way round.
_GATE_FINGERPRINTS: set = set()
_AUX_UNMATCHED: list = []


def fingerprint(t) -> tuple:
    v = t.detach().double()
    return tuple(sorted(v.shape)), float(v.sum()), float(v.square().sum())


def record_call(record, op, a, out):
    fp = fingerprint(a["expert_vectors"])
    _GATE_FINGERPRINTS.add(fp)
    for aux in [r for r in _AUX_UNMATCHED if r["_fp"] == fp]:
        aux["gate_vectors"] = True
        del aux["_fp"]
        _AUX_UNMATCHED.remove(aux)
    record["k_max"] = int(a["k_max"])
    record["thresholds_abs_sum"] = float(a["thresholds"].detach().abs().sum())
    grad_probe(record, "thresholds", a["thresholds"])
    grad_probe(record, "expert_vectors", a["expert_vectors"])
    # revision 6 (blind5 dispatch-keeps-top-k): a weight that is not 0 but gets no gradient is an active expert the
    # model never combined (each used weight's gradient is the token's output gradient times that expert's output)
    grad_probe(record, "weights", out, count_unused=True)
    if record["call"] == 0:  # the model's own tokens and vectors, with every expert active (capped) and none (fallback)
        E = a["thresholds"].shape[-1]
        for name, level, k_max in (("capped", -FAR, max(1, E // 2)), ("fallback", FAR, K_MAX)):
            forced = {**a, "thresholds": torch.full_like(a["thresholds"], level), "k_max": k_max}
            record[f"replay_{name}_error"] = replay_error(op, SPEC, forced)


def judge_calls(calls, profile):
    problems = []
    if {c["k_max"] for c in calls} != {K_MAX}:
        problems.append(f"the model passes k_max {sorted({c['k_max'] for c in calls})}; the instruction says {K_MAX}")
    for key in ("thresholds", "expert_vectors", "weights"):
        if not all(c[key] for c in calls):
            problems.append(f"the {key} the model passes or gets do not require grad: they cannot learn")
        elif not max(c[f"{key}_grad"] for c in calls) > 0:
            problems.append(f"no gradient reached the op's {key} in any call: the gate does not learn through the op")
    dropped = max((c["weights_unused"] or 0) for c in calls)
    if dropped:
        problems.append(
            f"{dropped} active experts' weights got no gradient in one backward: the model does not combine every "
            "expert the gate made active (up to k_max)"
        )
    first = [c for c in calls if c["call"] == 0]
    if any(c["thresholds_abs_sum"] != 0 for c in first):
        problems.append("the thresholds of the first call are not all 0 (the paper initialises them at 0)")
    if not any(c["thresholds_abs_sum"] > 0 for c in calls):
        problems.append("the thresholds stay at 0 through every step of verify.sh: they do not learn")
    tol = SPEC.tolerance[torch.float32]
    for c in first:
        for name in ("capped", "fallback"):
            if not c[f"replay_{name}_error"] <= tol:
                problems.append(
                    f"on the model's own tokens with every expert {'active' if name == 'capped' else 'inactive'}, the "
                    f"op differs from the reference by {c[f'replay_{name}_error']:.2e} (the {name} rule)"
                )
    return problems


def make_aux_inputs(gen, dtype):
    """16 expert vectors of 32: the Gram's [E, E] and the [D, D] one differ in value by D - E, in gradient not at all
    (||W^T W - I||^2 - ||W W^T - I||^2 is constant), so only the value tells them apart."""
    return [(0.3 * torch.randn(16, 32, generator=gen)).to(dtype).requires_grad_()], {}


def record_aux_call(record, op, a, out):
    fp = fingerprint(a["expert_vectors"])
    record["gate_vectors"] = fp in _GATE_FINGERPRINTS
    if not record["gate_vectors"]:  # the gate may run after the aux loss in the forward: a later gate call matches it
        record["_fp"] = fp
        _AUX_UNMATCHED.append(record)
    grad_probe(record, "expert_vectors", a["expert_vectors"])
    grad_probe(record, "loss", out)


def judge_aux_calls(calls, profile):
    problems = []
    if not all(c["expert_vectors"] for c in calls):
        problems.append("the expert vectors the model passes to the auxiliary loss do not require grad")
    if not max(c["loss_grad"] for c in calls) > 0:
        problems.append("no gradient reached the auxiliary loss in any call: the model does not train on it")
    if not all(c["gate_vectors"] for c in calls):
        problems.append(
            "the model calls the auxiliary loss on vectors whose values are no gate call's expert vectors (normalised "
            "or other copies): the loss keeps the gate's own vectors near-orthogonal and small"
        )
    return problems


AUX = OpSpec(
    dynmoe_aux_loss_reference, make_aux_inputs, {torch.float32: 1e-4}, lambda out: [out], record_aux_call,
    judge_aux_calls,
)  # fmt: skip
SPEC = OpSpec(
    dynmoe_gate_reference, make_inputs, {torch.float32: 1e-4}, lambda out: [out], record_call, judge_calls, AUX
)

if __name__ == "__main__":
    sys.exit(main(SPEC, __file__))
