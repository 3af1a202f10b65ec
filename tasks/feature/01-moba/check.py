"""feature-01 MoBA: the agent's moba_attention against reference.py, then training, what the model feeds the op
(top-3 of 8 blocks of the profile's sequence; q and k as wide as the model's whole qk head, RoPE part included;
the output used; called from every layer's attention) and liveness (feature_check.py). float32 only: the
block choice is a discrete top-k, which bf16 gate scores may break differently from ours."""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # feature_check.py
from feature_check import LAYERS, OpSpec, calling_modules, grad_probe, load_reference, main  # noqa: E402

moba_attention_reference = load_reference(HERE).moba_attention_reference
QK_HEAD_DIM = {"smoke": 48, "gpu1": 192, "paper": 192}  # qk_nope_head_dim + qk_rope_head_dim of each profile's model


def make_inputs(gen, dtype):
    # 88 tokens in blocks of 16: 6 blocks, the last one short; top-3 as the task asks, so early queries have fewer
    # candidates than k and later ones must choose.
    q, k, v = (torch.randn(2, 88, 2, n, generator=gen).to(dtype).requires_grad_() for n in (24, 24, 16))
    return [q, k, v], {"block_size": 16, "top_k": 3}


def record_call(record, op, a, out):
    record["top_k"], record["block_size"], record["seq"] = int(a["top_k"]), int(a["block_size"]), a["q"].shape[1]
    record["qk_head_dim"] = [a["q"].shape[-1], a["k"].shape[-1]]
    grad_probe(record, "output", out)
    callers = calling_modules(limit=1)  # the layer's attention (or whichever module with submodules called it)
    record["caller"] = id(callers[0]) if callers else None


def judge_calls(calls, profile):
    problems = []
    if {c["top_k"] for c in calls} != {3}:
        problems.append(f"the model passes top_k {sorted({c['top_k'] for c in calls})}; the task says 3")
    blocks = {-(-c["seq"] // c["block_size"]) for c in calls}
    if blocks != {8}:
        problems.append(f"the model cuts its sequence into {sorted(blocks)} blocks; the task says 8")
    dims = {tuple(c["qk_head_dim"]) for c in calls}
    if dims != {(QK_HEAD_DIM[profile],) * 2}:
        problems.append(
            f"the model passes q and k of head size {sorted(dims)}; attention's queries and keys after RoPE (no-RoPE "
            f"and RoPE parts together) are {QK_HEAD_DIM[profile]} wide in this profile"
        )
    if not max(c["output_grad"] for c in calls) > 0:
        problems.append("no gradient reached the op's output: the model does not use it")
    # Revision 6 (blind5 dense-layer-skipped): MoBA replaces the attention of every layer, the dense first ones too.
    layers = {len({c["caller"] for c in calls if c["pid"] == pid}) for pid in {c["pid"] for c in calls}}
    if layers != {LAYERS[profile]}:
        problems.append(
            f"the op was called from {sorted(layers)} modules a process; the profile's model has {LAYERS[profile]} "
            "layers, and MoBA is the attention of every one"
        )
    return problems


SPEC = OpSpec(moba_attention_reference, make_inputs, {torch.float32: 1e-4}, lambda out: [out], record_call, judge_calls)

if __name__ == "__main__":
    sys.exit(main(SPEC, __file__))
