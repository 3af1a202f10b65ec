"""benchmarks/megatron_core_run.py on CPU: the build smoke, the swapped modules against references, the AdamW switch.

megatron-core 0.19.2 cannot run an MoE training step without CUDA (the driver's docstring lists where), so these
tests cover the build and the swapped pieces; the step loop, the alltoall dispatcher, DDP and the distributed
optimizer run only on the GPU machine. Tests that need torch.distributed run in a child process (gloo, world 1).
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("megatron.core", reason="megatron-core needs Python >= 3.12 to install; not importable here")

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "benchmarks" / "megatron_core_run.py"
TINY_SPEC = {
    "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
    "tie_word_embeddings": False, "seq_len": 32, "sequences_per_gpu": 2, "ep": 1, "warmup_steps": 1,
    "timed_steps": 2, "balanced_routing": False, "seed": 0,
}  # fmt: skip


def load_driver():
    sys.path.insert(0, str(DRIVER.parent))  # the driver imports benchmarks/synthetic.py
    spec = importlib.util.spec_from_file_location("megatron_core_run", DRIVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_child(args: list[str], tmp_path: Path, port: str = "29531") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env |= {"MASTER_PORT": port, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def write_spec(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(TINY_SPEC | changes))
    return path


def test_cpu_smoke_builds_megatron_model_with_swapped_modules(tmp_path):
    spec = write_spec(tmp_path)
    describe = tmp_path / "describe.json"
    result = run_child([str(DRIVER), "--spec", str(spec), "--device", "cpu", "--describe", str(describe)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "CPU smoke: built only" in result.stdout
    built = json.loads(describe.read_text())
    assert built["core_attention"] == "SDPACoreAttention"
    assert built["experts"] == "GroupedMMExperts"
    assert built["router"] == "TopKRouter"
    assert built["token_dispatcher"] == "MoEAllGatherTokenDispatcher"  # alltoall needs a CUDA stream to construct
    assert built["model_wrapper"] == "Float16Module"
    assert built["optimizer"] is None  # DDP buffers and the distributed optimizer need CUDA
    assert built["forward_backward_func"] == "forward_backward_no_pipelining"


def test_gpu_settings_are_valid_megatron_configs():
    driver = load_driver()
    full_spec = driver.OPTIONAL_FIELDS | TINY_SPEC
    config = driver.make_transformer_config(full_spec | {"balanced_routing": True}, "cuda")
    assert config.moe_token_dispatcher_type == "alltoall"
    assert config.moe_router_load_balancing_type == "global_aux_loss"
    assert config.moe_router_force_load_balancing and not config.moe_router_pre_softmax
    assert config.moe_router_dtype == "fp32" and config.moe_router_score_function == "softmax"
    assert config.qk_layernorm and config.normalization == "RMSNorm" and not config.add_bias_linear
    assert config.hidden_dropout == 0.0 and config.attention_dropout == 0.0 and config.recompute_granularity is None
    assert driver.make_transformer_config(full_spec | {"norm_topk_prob": False}, "cuda").moe_router_pre_softmax
    optimizer_config = driver.make_optimizer_config()
    assert optimizer_config.optimizer == "adam" and optimizer_config.decoupled_weight_decay
    assert (optimizer_config.lr, optimizer_config.adam_eps, optimizer_config.weight_decay) == (3e-4, 1e-8, 0.1)
    assert optimizer_config.clip_grad == 1.0 and optimizer_config.bf16 and optimizer_config.use_distributed_optimizer
    assert driver.make_ddp_config().use_distributed_optimizer


def test_layer_spec_swaps_only_core_attention_and_experts():
    driver = load_driver()
    layer = driver.make_layer_spec(num_experts=4)
    assert layer.submodules.self_attention.submodules.core_attention is driver.SDPACoreAttention
    moe_submodules = layer.submodules.mlp.keywords["submodules"]
    assert moe_submodules.experts is driver.GroupedMMExperts
    assert moe_submodules.router.__name__ == "TopKRouter"


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_sdpa_core_attention_matches_softmax_reference(num_kv_heads):
    driver = load_driver()
    full_spec = driver.OPTIONAL_FIELDS | TINY_SPEC | {"num_key_value_heads": num_kv_heads}
    config = driver.make_transformer_config(full_spec, "cpu")
    attention = driver.SDPACoreAttention(config, 1, driver.AttnMaskType.causal, "self")
    S, B, H, d = 7, 2, 4, 16
    torch.manual_seed(0)
    q, k, v = torch.randn(S, B, H, d), torch.randn(S, B, num_kv_heads, d), torch.randn(S, B, num_kv_heads, d)
    out = attention(q, k, v, None)
    # Reference: megatron DotProductAttention's math (repeat KV heads, scaled scores, causal softmax), in fp32.
    k_rep, v_rep = (t.repeat_interleave(H // num_kv_heads, dim=2) for t in (k, v))
    scores = torch.einsum("qbhd,kbhd->bhqk", q, k_rep) / math.sqrt(d)
    scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    expected = torch.einsum("bhqk,kbhd->qbhd", scores.softmax(-1), v_rep).reshape(S, B, H * d)
    assert out.shape == (S, B, H * d)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


# Run in a child: gloo world of 1, megatron's parallel state, modules built by megatron's own builders.
INSIDE_MEGATRON_CHILD = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import megatron_core_run as driver
from megatron.core.process_groups_config import ProcessGroupCollection
from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
from megatron.core.transformer.mlp import MLPSubmodules
from megatron.core.transformer.moe.experts import SequentialMLP

spec, _, _ = driver.setup_distributed(sys.argv[2], "cpu")
config, model, _ = driver.make_model_and_optimizer(spec, "cpu")
report = {}

# Megatron's SelfAttention (qkv projection, qk RMSNorm, output projection) calling SDPACoreAttention.
attention = model.module.decoder.layers[0].self_attention
x = torch.randn(spec["seq_len"], 2, spec["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
out, bias = attention(x, attention_mask=None)
out.float().square().mean().backward()
report["attention_out_shape"] = list(out.shape)
report["attention_grads_finite"] = bool(x.grad.isfinite().all()) and all(
    p.grad is not None and bool(p.grad.isfinite().all()) for p in attention.parameters())

# GroupedMMExperts against megatron's SequentialMLP oracle with the same weights; one expert gets no token.
pg = ProcessGroupCollection.use_mpu_process_groups()
oracle = SequentialMLP(4, config, MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear),
                       pg_collection=pg)
experts = driver.GroupedMMExperts(4, config, pg_collection=pg)
with torch.no_grad():
    for e, mlp in enumerate(oracle.local_experts):
        experts.gate_up_proj[e].copy_(mlp.linear_fc1.weight)
        experts.down_proj[e].copy_(mlp.linear_fc2.weight)
tokens_per_expert = torch.tensor([5, 0, 7, 3])
hidden = torch.randn(15, spec["hidden_size"], dtype=torch.bfloat16)
probs = torch.rand(15)
h1, h2 = hidden.clone().requires_grad_(), hidden.clone().requires_grad_()
p1, p2 = probs.clone().requires_grad_(), probs.clone().requires_grad_()
y_oracle, _ = oracle(h1, tokens_per_expert, p1)
y_experts, bias = experts(h2, tokens_per_expert, p2)
grad = torch.randn_like(y_oracle)
y_oracle.backward(grad)
y_experts.backward(grad)
rel = lambda a, b: float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12))
report["experts_bias_is_none"] = bias is None
report["experts_out_rel_err"] = rel(y_experts, y_oracle)
report["experts_dx_rel_err"] = rel(h2.grad, h1.grad)
report["experts_dprobs_rel_err"] = rel(p2.grad, p1.grad)
report["experts_dw_rel_err"] = max(
    rel(experts.gate_up_proj.grad[e], m.linear_fc1.weight.grad) for e, m in enumerate(oracle.local_experts) if e != 1)
report["expert_params_not_allreduce"] = [p.allreduce for p in experts.parameters()] == [False, False]

# The loss as GPTModel computes it (megatron's native fused cross-entropy) against F.cross_entropy in fp32.
logits = torch.randn(spec["seq_len"], 2, spec["vocab_size"], dtype=torch.bfloat16)
labels = torch.randint(0, spec["vocab_size"], (2, spec["seq_len"]))
loss = model.module.compute_language_model_loss(labels, logits)
expected = torch.nn.functional.cross_entropy(
    logits.float().transpose(0, 1).reshape(-1, spec["vocab_size"]), labels.reshape(-1), reduction="none")
report["loss_fusion"] = [config.cross_entropy_loss_fusion, config.cross_entropy_fusion_impl]
report["loss_rel_err"] = rel(loss.reshape(-1), expected)
print("REPORT " + json.dumps(report))
"""


def test_swapped_modules_inside_megatron_match_megatron_oracles(tmp_path):
    result = run_child(["-c", INSIDE_MEGATRON_CHILD, str(DRIVER.parent), str(write_spec(tmp_path))], tmp_path, "29532")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.split("REPORT ", 1)[1])
    assert report["attention_out_shape"] == [TINY_SPEC["seq_len"], 2, TINY_SPEC["hidden_size"]]
    assert report["attention_grads_finite"]
    assert report["experts_bias_is_none"] and report["expert_params_not_allreduce"]
    for key in ("experts_out_rel_err", "experts_dx_rel_err", "experts_dprobs_rel_err", "experts_dw_rel_err"):
        assert report[key] < 2e-2, (key, report[key])  # bf16: both round the same math in different orders
    assert report["loss_fusion"] == [True, "native"]
    assert report["loss_rel_err"] < 1e-5, report["loss_rel_err"]  # both in fp32 from the same bf16 logits


def test_use_fused_adamw_switches_megatrons_torch_adamw_to_the_fused_kernel(monkeypatch):
    driver = load_driver()

    class MegatronOptimizerStandIn:  # what use_fused_adamw reads from megatron's (Chained)DistributedOptimizer
        def __init__(self, params):
            self.optimizer = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1, eps=1e-8)

    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(8, 8)) for _ in range(2)]
    reference_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
    for p, r in zip(params, reference_params):
        p.grad = torch.randn_like(p)
        r.grad = p.grad.clone()
    fused_calls = []
    fused_adamw = torch._fused_adamw_
    monkeypatch.setattr(torch, "_fused_adamw_", lambda *a, **k: fused_calls.append(1) or fused_adamw(*a, **k))
    optimizer = MegatronOptimizerStandIn(params)
    driver.use_fused_adamw(optimizer)
    optimizer.optimizer.step()
    torch.optim.AdamW(reference_params, lr=3e-4, weight_decay=0.1, eps=1e-8, foreach=False).step()
    assert fused_calls, "torch AdamW did not take the fused path"
    for p, r in zip(params, reference_params):
        torch.testing.assert_close(p, r)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_sizes": 64}, "unknown field 'hidden_sizes'"),
        ({"seq_len": "32"}, "field 'seq_len' must be int"),
        ({"balanced_routing": 1}, "field 'balanced_routing' must be bool"),
        ({"ep": 2}, "field 'ep' must be 1 or the number of processes (1)"),
        ({"tie_word_embeddings": True}, "field 'tie_word_embeddings' must be false"),
        ({"moe_intermediate_size": 30}, "field 'moe_intermediate_size' must be a multiple of 8"),
    ],
)
def test_bad_spec_is_an_error_naming_the_field(tmp_path, change, message):
    driver = load_driver()
    with pytest.raises(SystemExit, match=message.replace("(", r"\(").replace(")", r"\)")):
        driver.load_bench_spec(str(write_spec(tmp_path, **change)), world_size=1)
    missing = dict(TINY_SPEC)
    del missing["seed"]
    (tmp_path / "missing.json").write_text(json.dumps(missing))
    with pytest.raises(SystemExit, match="missing field 'seed'"):
        driver.load_bench_spec(str(tmp_path / "missing.json"), world_size=1)


def test_help_lists_the_spec_fields(tmp_path):
    result = run_child([str(DRIVER), "--help"], tmp_path)
    assert result.returncode == 0
    assert "--spec" in result.stdout and "balanced_routing" in result.stdout and "--device" in result.stdout


def test_throughput_spec_loads_in_the_driver(tmp_path):
    """What benchmarks/throughput.py writes for the first local config (EP2, balanced) is a valid driver spec."""
    spec = importlib.util.spec_from_file_location("throughput", REPO / "benchmarks" / "throughput.py")
    throughput = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(throughput)
    cfg = throughput.load_config("qwen3-30b-a3b-4l")
    run_spec = throughput.megatron_spec(cfg, throughput.mesh_of(cfg["meshes"][1]), "balanced", (3, 8))
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(run_spec))
    loaded = load_driver().load_bench_spec(str(path), world_size=2)
    assert loaded["ep"] == 2 and loaded["balanced_routing"] and loaded["rms_norm_eps"] == 1e-6


def test_batches_are_made_before_the_first_step_one_per_step():
    """Every step's ids exist before the loop (benchmarks/synthetic.py); each rank its own; labels shifted by one."""
    driver = load_driver()
    spec = dict(TINY_SPEC, warmup_steps=2, timed_steps=3)
    ranks = [list(driver.make_batches(spec, "cpu", dp_rank)) for dp_rank in (0, 1)]
    assert len(ranks[0]) == 5
    batch = ranks[0][0]
    assert batch["input_ids"].shape == batch["labels"].shape == (spec["sequences_per_gpu"], spec["seq_len"])
    assert torch.equal(batch["input_ids"][:, 1:], batch["labels"][:, :-1])
    assert int(batch["labels"].max()) < spec["vocab_size"]
    assert not torch.equal(ranks[0][0]["input_ids"], ranks[1][0]["input_ids"])
    assert not torch.equal(ranks[0][0]["input_ids"], ranks[0][1]["input_ids"])
