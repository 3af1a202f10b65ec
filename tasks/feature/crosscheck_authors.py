"""Cross-check our four feature references against the authors' public code, on random inputs.

Run once by hand, not in CI (the authors' code is not in this repository, and we copy none of it):
    python tasks/feature/crosscheck_authors.py AUTHORS_DIR
AUTHORS_DIR holds, extracted from each repository at the commit named in CROSSCHECK.md:
moba_naive.py (MoonshotAI/MoBA moba/moba_naive.py), diffattn_src.py and rms_norm.py (microsoft/unilm
Diff-Transformer/multihead_diffattn.py and rms_norm.py), moepp_layer.py (SkyworkAI/MoE-plus-plus
MoE++/moe_plus_plus_layer.py), sharded_moe.py (LINs-lab/DynMoE DeepSpeed-0.9.5/deepspeed/moe/sharded_moe.py),
plus stubs kernel/rotary.py (identity apply_rotary_emb) and flash_attn.py (flash_attn_func = None).
Prints the relative errors as JSON; CROSSCHECK.md records a run.
"""

import ast
import importlib.util
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

AUTHORS = Path(sys.argv[1]).resolve()
sys.path.insert(0, str(AUTHORS))
REF = Path(__file__).resolve().parent


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


moba = load(f"{REF}/01-moba/reference.py", "moba_ref")
dyn = load(f"{REF}/02-dynmoe/reference.py", "dyn_ref")
diff = load(f"{REF}/03-diff-attention/reference.py", "diff_ref")
mpp = load(f"{REF}/04-moe-plus-plus/reference.py", "mpp_ref")
rel = lambda a, b: ((a.double() - b.double()).norm() / b.double().norm()).item()
out = {}
torch.manual_seed(0)

# MoBA: authors' moba_naive on varlen [S, H, D] against ours on [B, S, H, D]
from moba_naive import moba_attn_varlen_naive  # noqa: E402 (the authors' dir is on sys.path only now)

worst = 0.0
for B, S, H, D, block, k in [
    (2, 64, 2, 16, 16, 2),
    (1, 100, 3, 8, 16, 3),
    (2, 48, 2, 8, 8, 10),
    (1, 2048, 2, 32, 256, 3),
]:
    q, kk, v = (torch.randn(B, S, H, D, dtype=torch.float64) for _ in range(3))
    ours = moba.moba_attention_reference(q, kk, v, block, k).double()
    cu = torch.arange(0, (B + 1) * S, S)
    theirs = moba_attn_varlen_naive(
        q.reshape(B * S, H, D).float(), kk.reshape(B * S, H, D).float(), v.reshape(B * S, H, D).float(), cu, S, block, k
    ).reshape(B, S, H, D)
    worst = max(worst, rel(ours, theirs))
out["moba_rel_err_max"] = worst

# Differential attention: authors' MultiheadDiffAttn (identity rotary) against ours
src = open(AUTHORS / "diffattn_src.py").read()
ns = {}
exec(compile(src, "multihead_diffattn.py", "exec"), ns)
worst_f = worst_g = 0.0
for depth in [0, 3]:
    torch.manual_seed(depth)
    B, S, E, H = 2, 24, 64, 4
    m = ns["MultiheadDiffAttn"](E, depth, H).double()
    with torch.no_grad():
        m.subln.weight.copy_(torch.rand(m.subln.weight.shape) + 0.5)
    x = torch.randn(B, S, E, dtype=torch.float64, requires_grad=True)
    theirs = m(x, (None, None))
    Dh = m.head_dim
    q = m.q_proj(x).view(B, S, 2 * H, Dh)
    kk = m.k_proj(x).view(B, S, 2 * H, Dh)
    v = m.v_proj(x).view(B, S, H, 2 * Dh)
    o = diff.differential_attention_reference(
        q[:, :, 0::2],
        kk[:, :, 0::2],
        q[:, :, 1::2],
        kk[:, :, 1::2],
        v,
        m.lambda_q1,
        m.lambda_k1,
        m.lambda_q2,
        m.lambda_k2,
        diff.lambda_init_for_layer(depth + 1),
        m.subln.weight,
        m.subln.eps,
    )
    ours = m.out_proj(o.reshape(B, S, H * 2 * Dh).to(x.dtype))
    worst_f = max(worst_f, rel(ours, theirs))
    g = torch.randn_like(ours)
    gt = torch.autograd.grad(theirs, [x, m.lambda_q1, m.lambda_k2, m.subln.weight], g, retain_graph=True)
    go = torch.autograd.grad(ours, [x, m.lambda_q1, m.lambda_k2, m.subln.weight], g)
    worst_g = max(worst_g, max(rel(a, b) for a, b in zip(go, gt)))
out["diff_attention_rel_err_forward"] = worst_f
out["diff_attention_rel_err_grads"] = worst_g

# DynMoE: authors' GAMoEGateT (training mode) with topanygating_opt's 1/K weights, against ours
tree = ast.parse(open(AUTHORS / "sharded_moe.py").read())
keep = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in ("GAMoEGateBackward", "GAMoEGateT")]
ns = {"torch": torch, "F": F, "Tensor": torch.Tensor, "Any": object}
exec(compile(ast.Module(body=keep, type_ignores=[]), "sharded_moe.py", "exec"), ns)
T, D, E = 64, 32, 16
torch.manual_seed(1)
g = ns["GAMoEGateT"](D, E, max_expert_num=E, fp32_gate=True).double()
with torch.no_grad():
    g.gates.copy_(torch.randn(E) * 0.3)
x = torch.randn(T, D, dtype=torch.float64)
g.train()
act, K = g(x)
theirs = act / K.clamp(min=1).unsqueeze(1)
ours = dyn.dynmoe_gate_reference(x, g.sim_matrix.T, g.gates, k_max=E).double()
rows = K > 0
out["dynmoe_tokens_with_active_experts"] = int(rows.sum())
out["dynmoe_rel_err_forward_active_rows"] = rel(ours[rows], theirs[rows])
up = torch.randn(T, E, dtype=torch.float64) * rows[:, None]
gt = torch.autograd.grad((theirs * up).sum(), [g.sim_matrix, g.gates])
go = torch.autograd.grad(
    (dyn.dynmoe_gate_reference(x, g.sim_matrix.T, g.gates, k_max=E).double() * up).sum(), [g.sim_matrix, g.gates]
)
out["dynmoe_rel_err_grads"] = max(rel(a, b) for a, b in zip(go, gt))
g.eval()
with torch.no_grad():
    g.gates.copy_(torch.randn(E) * 0.3 + 1.5)  # high thresholds: some tokens activate no expert and fall back
act_e, K_e = g(x)
out["dynmoe_eval_tokens_with_one_expert_incl_fallback"] = int((act_e.sum(1) == 1).sum())
theirs_e = act_e / K_e.clamp(min=1).unsqueeze(1)
out["dynmoe_rel_err_eval_with_fallback"] = rel(
    dyn.dynmoe_gate_reference(x, g.sim_matrix.T, g.gates, k_max=E).detach().double(), theirs_e.detach()
)

# MoE++: authors' Router (gating residual), ConstantExpert, CopyExpert, ZeroExpert against ours
import moepp_layer as A  # noqa: E402

T, D, Fn, C = 40, 16, 6, 2
E = Fn + C + 2
torch.manual_seed(2)


class Shape:
    hidden_size = D


router = A.Router(D, E, False, False, False, 1.0).double()
consts = [A.ConstantExpert(Shape()).double() for _ in range(C)]
x = torch.randn(T, D, dtype=torch.float64)
prev = torch.randn(T, E, dtype=torch.float64)
_, their_logits = router(x, prev)
logits = (x.float() @ router.wg.weight.T).double()  # their router runs in fp32
ffn = torch.randn(T, Fn, D, dtype=torch.float64)
# our order: F FFN, zero, copy, constants; theirs: F FFN, constants, copy, zero
perm = list(range(Fn)) + [Fn + C + 1, Fn + C] + [Fn + c for c in range(C)]
W_g = router.gate_map.weight[perm][:, perm]
y, routed = mpp.moepp_expert_mix_reference(
    x,
    logits[:, perm],
    prev[:, perm],
    W_g,
    ffn,
    torch.stack([c.constant for c in consts]),
    torch.stack([c.wg.weight for c in consts]),
    2,
    1,
    1,
)
out["moepp_rel_err_routed_logits"] = rel(routed, their_logits[:, perm].double())
const_theirs = torch.stack([c(x) for c in consts], 1)
a = torch.einsum("td,cjd->tcj", x, torch.stack([c.wg.weight for c in consts])).softmax(-1)
const_ours = a[..., :1] * x[:, None] + a[..., 1:] * torch.stack([c.constant for c in consts])[None]
out["moepp_rel_err_constant_experts"] = rel(const_ours, const_theirs)
print(json.dumps(out, indent=1))
