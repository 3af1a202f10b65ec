"""feature-03 Differential attention: the agent's differential_attention against reference.py (forward and gradients,
lambda vectors and norm weight included), then training, what the model feeds the op (lambda_init by the paper's depth
rule in every layer, learnable lambda vectors of q1's head size and norm weight that receive gradients, eps 1e-5, the
output used, k1 and k2 each holding half of MLA's shared RoPE key, q and k as the layer's projections give them, not
scaled) and liveness (feature_check.py). float32 is the sharp check (1e-4). bfloat16 is compared with the reference in
float64: the SDPA gold's bf16 error has a long tail on lambda's gradient (one scalar summed over both maps) at
lambda_init near 0.8, up to 1.5e-1 in a one-off sweep of 6,000 trials; the tolerance is twice that (README.md;
measure_false_fail.py keeps the 1,000-check measurement)."""

import math
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # feature_check.py
from feature_check import (  # noqa: E402
    LAYERS,
    OpSpec,
    calling_modules,
    grad_probe,
    load_reference,
    main,
    run_factor,
    submodule_outputs,
)

reference = load_reference(HERE)
differential_attention_reference = reference.differential_attention_reference
lambda_init_for_layer = reference.lambda_init_for_layer
LEARNED = ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2", "norm_weight")
HALF_ROPE = {"smoke": 8, "gpu1": 32, "paper": 32}  # qk_rope_head_dim / 2: the RoPE dims of each half
YARN = (0.1 * 0.707 * math.log(40.0) + 1) ** 2  # YaRN's temperature mscale(40, 0.707)^2 of the gpu1 and paper models
SCORE_FACTOR = {"smoke": (1.0,), "gpu1": (1.0, YARN), "paper": (1.0, YARN)}  # what q.k may carry besides 1/sqrt(d)
PROBE = 8  # leading dims of each half looked up in the calling layer's projections
# The lambda vectors start from N(0, 0.1^2): at the first call of each layer (before any update) their pooled std is
# 0.1 within sampling error (4 x d values a layer, d 16 on smoke: 3 layers give a relative error near 4%, so 30%
# is over 7 standard errors); 0.01 (the variance for the std) or zeros fall far outside (revision 4).
LAMBDA_STD, LAMBDA_STD_SLACK = 0.1, 0.3


def make_inputs(gen, dtype):
    q1, k1, q2, k2 = (torch.randn(2, 32, 3, 8, generator=gen).to(dtype).requires_grad_() for _ in range(4))
    v = torch.randn(2, 32, 3, 12, generator=gen).to(dtype).requires_grad_()
    lambdas = [(0.1 * torch.randn(8, generator=gen)).to(dtype).requires_grad_() for _ in range(4)]
    norm_weight = (torch.rand(12, generator=gen) + 0.5).to(dtype).requires_grad_()
    layer = int(torch.randint(1, 28, (1,), generator=gen))  # lambda_init of any layer of the paper's 27
    return [q1, k1, q2, k2, v, *lambdas, lambda_init_for_layer(layer), norm_weight, 1e-5], {}


def shared_dims(k_BSHD) -> int:
    """How many dims of k hold the same values in every head: MLA's RoPE key is one head broadcast to all, so each
    half of a head cut as the instruction says carries qk_rope_head_dim / 2 of them."""
    k = k_BSHD.detach()
    return int((k == k[:, :, :1]).reshape(-1, k.shape[-1]).all(0).sum())


def input_factors(a) -> dict[str, float | None]:
    """For q1, k1, q2, k2: c such that their leading PROBE dims are c times a run of one output of the calling
    layer's submodules (its projections), at two positions past 0 (where RoPE turns nothing) and two heads; None
    where no run matches, before the layer's hooks have seen a forward, or where reading them fails (a layout this
    search does not know is no verdict on the model)."""
    factors = dict.fromkeys(("q1", "k1", "q2", "k2"))
    try:
        modules = calling_modules(limit=1)
        outputs = submodule_outputs(modules[0]) if modules else None
        for key in factors if outputs else ():
            t = a[key].detach()
            S, H = t.shape[1], t.shape[2]
            found = [run_factor(t[0, s, h, :PROBE], outputs) for s in (S // 2, S - 1) for h in (0, H - 1)]
            if None not in found and max(found) - min(found) <= 1e-2 * abs(found[0]):
                factors[key] = found[0]
    except Exception:
        return dict.fromkeys(factors)
    return factors


def record_call(record, op, a, out):
    record["lambda_init"], record["eps"] = float(a["lambda_init"]), float(a["eps"])
    record["shared_dims"] = [shared_dims(a["k1"]), shared_dims(a["k2"])]
    record["factors"] = input_factors(a)
    lambdas = torch.cat([a[k].detach().float().flatten() for k in LEARNED[:4]])
    record["lambda_sum_sq"], record["lambda_count"] = float(lambdas.square().sum()), lambdas.numel()
    record["lambda_dims"], record["half_dim"] = [a[k].shape[-1] for k in LEARNED[:4]], a["q1"].shape[-1]
    for key in LEARNED:
        grad_probe(record, key, a[key])
    grad_probe(record, "output", out)


def judge_calls(calls, profile):
    problems = []
    seen = sorted({round(c["lambda_init"], 6) for c in calls})
    rule = [round(lambda_init_for_layer(layer), 6) for layer in range(1, LAYERS[profile] + 1)]
    if seen != rule:
        problems.append(
            f"the model's layers pass lambda_init {', '.join(f'{x:.4f}' for x in seen)}; the paper's rule "
            f"0.8 - 0.6 exp(-0.3 (l - 1)) for its {LAYERS[profile]} layers, l from 1, gives "
            f"{', '.join(f'{x:.4f}' for x in rule)}"
        )
    # Revision 6 (blind5 lambda-full-head-dim): lambda's vectors are in R^d, d the head size of each half (q1's).
    sizes = {(tuple(c["lambda_dims"]), c["half_dim"]) for c in calls}
    if any(set(dims) != {half} for dims, half in sizes):
        problems.append(
            f"the model's lambda vectors have sizes {sorted({d for dims, _ in sizes for d in dims})} where q1 and k1 "
            f"have head size {sorted({half for _, half in sizes})}: the paper's lambda_q1 .. lambda_k2 are in R^d"
        )
    first = calls[: LAYERS[profile]]  # step 1's forward: one call a layer, before any update
    std = math.sqrt(sum(c["lambda_sum_sq"] for c in first) / sum(c["lambda_count"] for c in first))
    if not abs(std / LAMBDA_STD - 1) <= LAMBDA_STD_SLACK:
        problems.append(
            f"the lambda vectors the model's first {len(first)} calls pass have std {std:.4f}; the paper initialises "
            f"them from N(0, 0.1^2), std {LAMBDA_STD}"
        )
    if {c["eps"] for c in calls} != {1e-5}:
        problems.append(f"the model passes eps {sorted({c['eps'] for c in calls})}; the instruction says 1e-05")
    for key in LEARNED:
        if not all(c[key] for c in calls):
            problems.append(f"the {key} the model passes does not require grad: it cannot learn")
        elif not max(c[f"{key}_grad"] for c in calls) > 0:
            problems.append(f"no gradient reached {key} in any call")
    shared = sorted({tuple(c["shared_dims"]) for c in calls})
    if shared != [(HALF_ROPE[profile],) * 2]:
        problems.append(
            f"k1 and k2 hold {shared} dims shared by every head (MLA's RoPE key); cut as the instruction says (half "
            f"the no-RoPE part and half the RoPE part each), each holds {HALF_ROPE[profile]}"
        )
    scales = sorted(
        {round(c["factors"][q] * c["factors"][k], 4) for c in calls for q, k in (("q1", "k1"), ("q2", "k2"))
         if c["factors"][q] is not None and c["factors"][k] is not None}
    )  # fmt: skip
    wrong = [x for x in scales if not any(abs(x / f - 1) <= 2e-2 for f in SCORE_FACTOR[profile])]
    if wrong:
        problems.append(
            f"the model scales q and k before the op by {wrong} (their product, against the layer's projections); "
            f"the op applies 1/sqrt(d) itself, so the model may scale them by {SCORE_FACTOR[profile]} (YaRN's "
            "temperature where the profile uses it) and nothing else"
        )
    if not max(c["output_grad"] for c in calls) > 0:
        problems.append("no gradient reached the op's output: the model does not use it")
    return problems


SPEC = OpSpec(
    differential_attention_reference,
    make_inputs,
    {torch.float32: 1e-4, torch.bfloat16: 3e-1},
    lambda out: [out],
    record_call,
    judge_calls,
)

if __name__ == "__main__":
    sys.exit(main(SPEC, __file__))
