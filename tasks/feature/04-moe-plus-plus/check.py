"""feature-04 MoE++: the agent's moepp_expert_mix against reference.py (output and routed logits, forward and
gradients) on inputs where every expert kind is chosen, then training, what the model does with the op (called in
every MoE layer, the first without previous logits, 1 zero, 1 copy and 2 constant experts after the FFN ones, as
many logits as the profile's model has experts, the model's top-k, the load-balancing loss reaching the last layer's
logits, learnable W_g, v and W_c that receive gradients, previous logits that pass the gradient back to their
layer, both outputs used, no token's output dropped; where the model passes zeros for ffn_out, the FFN weights it
takes from moepp_ffn_weights, on the routed logits, used as they are) and liveness (feature_check.py). float32 only:
routing is a discrete top-k."""

import sys
import weakref
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # feature_check.py
from feature_check import LAYERS, OpSpec, grad_probe, load_reference, main  # noqa: E402

reference = load_reference(HERE)
moepp_expert_mix_reference, moepp_ffn_weights_reference = (
    reference.moepp_expert_mix_reference,
    reference.moepp_ffn_weights_reference,
)
TOP_K = {"smoke": 2, "gpu1": 6, "paper": 6}  # num_experts_per_tok of each profile's provided model
EXPERTS = {"smoke": 8, "gpu1": 64, "paper": 64}  # n_routed_experts: MoE++ takes its 4 zero-computation ones out
DENSE_LAYERS = 1  # first_k_dense_replace of every profile's provided model
BALANCE_FLOOR = 1e-4  # below it, a token's logit gradient off the chosen experts' softmax is rounding (float32 ~1e-6)
_ROUTED: list = []  # (weak reference to a call's routed logits, its record): a later call's prev_logits marks it
# The routed logits of the latest calls, by value: a later call's prev_logits must equal one of them (a copy is
# fine), not this layer's raw logits (revision 4); as many as a step's MoE layers, forward and recompute.
_ROUTED_VALUES: list = []
ROUTED_KEPT = 64
_FFN_COUNT: list = [None]  # the latest moepp_expert_mix call's FFN experts: ids from it on are zero-computation
# The raw logits' gradient beyond the routed logits': 0 in float32 (smoke), a bf16 cast on the GPU profiles.
RAW_ROUTED_TOL = {"smoke": 1e-5, "gpu1": 1e-2, "paper": 1e-2}
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


def off_softmax_probe(record, logits, routed, top_k):
    """record["off_softmax"]: the largest share of a token's logit gradient, on the experts it did not choose, that is
    not the softmax's of its chosen ones. If the layer's loss terms reach its probabilities p = softmax(routed) only
    at the chosen experts (the experts' outputs weighted by them), an unchosen expert e gets exactly -p_e <p, g>,
    one multiple of p per token; a load-balancing loss on p adds a term per expert. A later layer's gating residual
    adds one too, so only the last MoE layer's calls are judged by it."""
    record["off_softmax"] = None
    if not (torch.is_tensor(logits) and logits.requires_grad):
        return
    p_TE = routed.detach().float().softmax(-1)
    unchosen_TE = torch.ones_like(p_TE, dtype=torch.bool).scatter_(-1, p_TE.topk(top_k, -1).indices, False)

    def hook(g):
        try:
            g_TE = g.detach().float().reshape(p_TE.shape)
            gu_TE, pu_TE = g_TE * unchosen_TE, p_TE * unchosen_TE
            c_T1 = (gu_TE * pu_TE).sum(-1, keepdim=True) / (pu_TE * pu_TE).sum(-1, keepdim=True).clamp(min=1e-30)
            share_T = (gu_TE - c_T1 * pu_TE).norm(dim=-1) / g_TE.norm(dim=-1).clamp(min=1e-30)
            record["off_softmax"] = max(record["off_softmax"] or 0.0, float(share_T.max()))
        except Exception as e:
            record["error"] = f"recording the logits' gradient: {type(e).__name__}: {e}"

    logits.register_hook(hook)


def raw_routed_probe(record, logits, routed):
    """record["raw_off_routed"]: the share of the raw logits' gradient that did not come through the routed logits
    (routed = logits + the gating residual, so a model that uses its raw logits only through the op gives them the
    routed logits' gradient, cast at most)."""
    record["raw_off_routed"], seen = None, {}
    if not (torch.is_tensor(logits) and logits.requires_grad and routed.requires_grad):
        return

    def keep(g):
        seen["routed"] = g.detach().float()

    def compare(g):
        try:
            if "routed" in seen:
                g = g.detach().float().reshape(seen["routed"].shape)
                share = float((g - seen.pop("routed")).norm() / g.norm().clamp(min=1e-30))
                record["raw_off_routed"] = max(record["raw_off_routed"] or 0.0, share)
        except Exception as e:
            record["error"] = f"recording the raw logits' gradient: {type(e).__name__}: {e}"

    routed.register_hook(keep)
    logits.register_hook(compare)


def record_call(record, op, a, out):
    record["top_k"], record["num_zero"], record["num_copy"] = int(a["top_k"]), int(a["num_zero"]), int(a["num_copy"])
    record["ffn"], record["constant"] = a["ffn_out"].shape[1], a["const_vectors"].shape[0]
    _FFN_COUNT[0] = record["ffn"]
    record["experts"], record["first_layer"] = a["logits"].shape[-1], a["prev_logits"] is None
    ffn = a["ffn_out"].detach()  # zeros expanded from a scalar (no memory) or real outputs
    record["ffn_zero"] = not bool(ffn.flatten()[0] if not any(ffn.stride()) else ffn.any())
    for key in LEARNED if a["prev_logits"] is not None else LEARNED[1:]:
        grad_probe(record, key, a[key])
    if a["prev_logits"] is not None:  # the gating residual trains the previous layer's router too (revision 3)
        grad_probe(record, "prev_logits", a["prev_logits"])
    grad_probe(record, "y", out[0])
    grad_probe(record, "routed_logits", out[1])
    record["feeds_later"] = False  # set when a later call takes this call's routed logits as its prev_logits
    prev = a["prev_logits"]
    for ref, earlier in _ROUTED if prev is not None else ():
        t = ref()  # the same tensor, or a view of it (detach): prev_logits is that call's routed logits
        if t is not None and (t is prev or (t.data_ptr(), t.shape) == (prev.data_ptr(), prev.shape)):
            earlier["feeds_later"] = True
    _ROUTED[:] = [(ref, c) for ref, c in _ROUTED if ref() is not None] + [(weakref.ref(out[1]), record)]
    if prev is not None:
        p = prev.detach()
        record["prev_is_routed"] = any(t.shape == p.shape and torch.equal(t, p) for t in _ROUTED_VALUES)
    _ROUTED_VALUES[:] = [*_ROUTED_VALUES[1 - ROUTED_KEPT :], out[1].detach()]
    off_softmax_probe(record, a["logits"], out[1], record["top_k"])
    raw_routed_probe(record, a["logits"], out[1])
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
    if {c["experts"] for c in calls} != {EXPERTS[profile]}:
        problems.append(
            f"the model routes over {sorted({c['experts'] for c in calls})} experts; the profile's model has "
            f"{EXPERTS[profile]}, the 4 zero-computation experts taken out of them, not added"
        )
    if {c["top_k"] for c in calls} != {TOP_K[profile]}:
        problems.append(f"the model routes top-{sorted({c['top_k'] for c in calls})}; its top-k is {TOP_K[profile]}")
    moe_layers = LAYERS[profile] - DENSE_LAYERS
    first = sum(c["first_layer"] for c in calls)
    if first == 0 or first * (moe_layers - 1) != len(calls) - first:  # a forward: one call a MoE layer
        problems.append(
            f"{first} of the model's {len(calls)} MoE++ calls have no previous logits: of its {moe_layers} MoE layers "
            "the first starts without them and every other one adds the gating residual"
        )
    for key in LEARNED:
        with_key = [c for c in calls if key in c]
        if not with_key or not all(c[key] for c in with_key):
            problems.append(f"the {key} the model passes does not require grad: it cannot learn")
        elif not max(c[f"{key}_grad"] for c in with_key) > 0:
            problems.append(f"no gradient reached {key} in any call")
    with_prev = [c for c in calls if not c["first_layer"]]
    if with_prev and not all(c["prev_is_routed"] for c in with_prev):
        problems.append(
            "a call's prev_logits equal no earlier call's routed logits: the gating residual must take the previous "
            "MoE layer's routed logits (after its own residual), not its raw router logits"
        )
    if with_prev and not all(c["prev_logits"] for c in with_prev):
        problems.append(
            "the prev_logits the model passes do not require grad (detached): the gating residual must carry the "
            "next layer's routing gradient back to the previous layer's router"
        )
    elif with_prev and not max(c["prev_logits_grad"] for c in with_prev) > 0:
        problems.append("no gradient reached prev_logits in any call: the gating residual does not train it")
    for key in ("y", "routed_logits"):
        if not max(c[f"{key}_grad"] for c in calls) > 0:
            problems.append(f"no gradient reached the op's {key}: the model does not use it")
    dropped = max((c["y_zero_rows"] or 0) for c in calls)
    if dropped:
        problems.append(f"{dropped} tokens' y got no gradient in one call: the model drops the op's output for them")
    raw = [c["raw_off_routed"] for c in with_prev if c["raw_off_routed"] is not None]
    if raw and not max(raw) <= RAW_ROUTED_TOL[profile]:
        problems.append(
            f"the router logits the model passes get {max(raw):.1e} of their gradient besides the routed logits': "
            "the model puts a loss on its raw logits (the load-balancing loss belongs on softmax(routed logits))"
        )
    last = [c["off_softmax"] for c in calls if not c["feeds_later"] and c["off_softmax"] is not None]
    if last and not max(last) >= BALANCE_FLOOR:
        problems.append(
            "in the last MoE layer, the logits' gradient on the experts a token did not choose is only the softmax's "
            f"of its chosen ones (at most {max(last):.1e} of a token's gradient is not): no load-balancing loss on "
            "softmax(routed_logits) reaches the routing"
        )
    totals = {k: sum(c["chosen"][k] for c in calls) for k in KINDS}
    if min(totals.values()) == 0:
        problems.append(
            f"on the model's own tokens, some expert kind was never chosen ({totals}): the run did not reach every rule"
        )
    return problems


# Revision 5 (blind3/blind4 ffn-weights-renormalised): a model that passes zeros for ffn_out weights its FFN experts
# outside the op, by what moepp_ffn_weights returns. Renormalising them (w / sum w) makes the loss blind to their
# scale, so the gradient g the weights w receive has sum_k w_k g_k = 0 for every token; used as they are, that sum
# is the token's output gradient times its FFN share. Per call, the median over tokens of |sum w g| / sum |w g|.
SCALE_SHARE_FLOOR = {"smoke": 1e-3, "gpu1": 2e-2, "paper": 2e-2}


def make_aux_inputs(gen, dtype):
    """32 tokens' routed logits over 10 experts, top-2."""
    return [torch.randn(32, 10, generator=gen).to(dtype).requires_grad_()], {"top_k": 2}


def dense_weights(out):
    """(weights, ids) as one [T, max id + 1] map with each weight at its id: compares both, differentiably."""
    weights, ids = out[0], out[1].long()
    return [weights.new_zeros(ids.shape[0], int(ids.max()) + 1).scatter(-1, ids, weights)]


def ffn_weights_probe(record, weights, ids):
    """From the gradient the returned weights get: record["scale_share"], the largest per-backward median over tokens
    of |sum_k w_k g_k| / sum_k |w_k g_k| (0 up to rounding for a renormalised use, revision 5), and
    record["zc_weights_used"], the slots on zero-computation experts (id >= the FFN experts' count) whose weight got a
    gradient: the model weighted an FFN output by them (revision 6, blind5 zc-slot-unmasked); their share is in y.
    Both None until a backward reaches the weights (or when they do not require grad)."""
    record["scale_share"], record["zc_weights_used"] = None, None
    if not (torch.is_tensor(weights) and weights.requires_grad):
        return
    w = weights.detach()
    zc = ids.detach() >= _FFN_COUNT[0] if _FFN_COUNT[0] is not None else torch.zeros_like(ids, dtype=torch.bool)

    def hook(g):
        try:
            record["zc_weights_used"] = max(record["zc_weights_used"] or 0, int((zc & (g != 0)).sum()))
            wg_TK = (w.float() * g.detach().float()).reshape(-1, w.shape[-1])
            total_T = wg_TK.abs().sum(-1)
            used_T = total_T > 0  # tokens with an FFN expert whose output the loss sees
            if used_T.any():
                share = float((wg_TK.sum(-1).abs()[used_T] / total_T[used_T]).median())
                record["scale_share"] = max(record["scale_share"] or 0.0, share)
        except Exception as e:
            record["error"] = f"recording the FFN weights' gradient: {type(e).__name__}: {e}"

    weights.register_hook(hook)


def record_aux_call(record, op, a, out):
    r = a["routed_logits"].detach()
    record["from_routed"] = any(t.shape == r.shape and torch.equal(t, r) for t in _ROUTED_VALUES)
    grad_probe(record, "weights", out[0])
    ffn_weights_probe(record, out[0], out[1])


def judge_aux_calls(calls, profile):
    problems = []
    if not all(c["from_routed"] for c in calls):
        problems.append(
            "a moepp_ffn_weights call's routed_logits equal no moepp_expert_mix call's routed logits: the FFN "
            "experts' weights come from softmax(routed_logits), after the gating residual"
        )
    if not all(c["weights"] for c in calls):
        problems.append("the FFN weights moepp_ffn_weights returns do not require grad: the router cannot learn")
    elif not max(c["weights_grad"] for c in calls) > 0:
        problems.append("no gradient reached the weights moepp_ffn_weights returns: the model does not use them")
    used = max((c["zc_weights_used"] or 0) for c in calls)
    if used:
        problems.append(
            f"{used} top-k slots on zero-computation experts had their moepp_ffn_weights weight used (it got a "
            "gradient): only the FFN experts' slots weight an FFN output; the others' share is already in y"
        )
    shares = [c["scale_share"] for c in calls if c["scale_share"] is not None]
    if shares and not min(shares) >= SCALE_SHARE_FLOOR[profile]:
        problems.append(
            "the model uses the FFN weights moepp_ffn_weights returns only up to their scale (median share "
            f"{min(shares):.1e} of a token's weight gradient along the weights): renormalised; each FFN expert is "
            "weighted by its probability as it is"
        )
    return problems


# Revision 7 (dropped-tokens-zeroed on gpu1): top-6 of 64 experts, 4 of them zero-computation, never routes a token to
# zero-computation experts only, so a model that drops such tokens' output trains there as the gold does. One more
# step of the same model routing top-1 (a token picks a zero-computation expert alone about 1 time in 16) must keep
# every token's y, on every profile.
BRANCH_ARGS = {
    "pithtrain": ["--set", "model.num_experts_per_tok=1", "--set", "training.max_steps=1"],
    "torchtitan": ["--model.flavor", "feature_top1", "--training.steps", "1"],  # the profile's flavor routing top-1
    "megatron-lm": ["--moe-router-topk", "1", "--train-iters", "1", "--lr-warmup-iters", "0"],  # 1 < warm-up: asserts
}


def judge_branch(calls, profile):
    """The branch run's calls: tokens routed to zero-computation experts only occurred, and none lost its y."""
    only_zc = sum(c["chosen"]["only zero-computation"] for c in calls)
    if not only_zc:
        return ["routing top-1, no token went to zero-computation experts only: the run did not reach that rule"]
    dropped = max((c["y_zero_rows"] or 0) for c in calls)
    if dropped:
        return [
            f"{dropped} tokens' y got no gradient in one call (of {only_zc} routed to zero-computation experts only): "
            "the model drops the op's output for them; a zero, copy or constant expert's output is the token's"
        ]
    return []


AUX = OpSpec(
    moepp_ffn_weights_reference, make_aux_inputs, {torch.float32: 1e-5}, dense_weights, record_aux_call,
    judge_aux_calls,
)  # fmt: skip
SPEC = OpSpec(
    moepp_expert_mix_reference, make_inputs, {torch.float32: 1e-4}, lambda out: list(out), record_call, judge_calls,
    AUX, aux_needed=lambda calls: any(c.get("ffn_zero") for c in calls), branch_args=BRANCH_ARGS,
    judge_branch=judge_branch,
)  # fmt: skip

if __name__ == "__main__":
    sys.exit(main(SPEC, __file__))
