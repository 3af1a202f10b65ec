"""Every mesh computes what one process computes: per-step losses over 5 steps and every gradient after
one step, for a tiny fp32 model of each family (relative differences under 1e-5): Qwen3-MoE on every mesh,
DeepSeek-V2 and GPT-OSS on a pipeline and a context-parallel mesh; plus a checkpoint saved on one mesh resumed
on others. Several gloo processes on CPU, spawned by tests/distributed_helpers.py."""

import os

import pytest
import torch
from conftest import TINY_MODEL, TINY_TOKENS
from distributed_helpers import run_in_processes

from pithtrain.tasks import pretrain_lm
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

STEPS = 5

# 4 layers so that PP2 gives every chunk a layer. The DeepSeek and GPT-OSS models turn on what a mesh could get
# wrong: a dense first layer and shared experts; YaRN's softmax scale (MLA); a window shorter than data.seq_len
# and sinks; expert biases; a load-balancing loss large enough to matter in the router's gradient.
MODELS = {
    "qwen3_moe": TINY_MODEL.replace("num_hidden_layers = 2", "num_hidden_layers = 4"),
    "deepseek_v2": """
[model]
family = "deepseek_v2"
vocab_size = 2048
hidden_size = 32
intermediate_size = 48
num_hidden_layers = 4
first_k_dense_replace = 1
num_attention_heads = 4
q_lora_rank = 12
kv_lora_rank = 16
qk_nope_head_dim = 8
qk_rope_head_dim = 4
v_head_dim = 6
n_routed_experts = 4
n_shared_experts = 2
num_experts_per_tok = 2
moe_intermediate_size = 16
rope_factor = 4.0
rope_original_max_position_embeddings = 8
rope_mscale = 1.0
rope_mscale_all_dim = 0.5
max_position_embeddings = 64
aux_loss_coef = 0.1
""",
    "gpt_oss": """
[model]
family = "gpt_oss"
vocab_size = 2048
hidden_size = 32
num_hidden_layers = 4
num_attention_heads = 4
num_key_value_heads = 2
head_dim = 8
sliding_window = 4
num_local_experts = 4
num_experts_per_tok = 2
intermediate_size = 16
rope_factor = 4.0
rope_original_max_position_embeddings = 8
max_position_embeddings = 64
aux_loss_coef = 0.1
""",
}


def write_config(tmp_path, name: str, family: str = "qwen3_moe", extra: str = "") -> str:
    # 16 sequences so that PP2 x DP2 x EP2 has 4 micro-batches; 8 (faster) where DP x EP is at most 2.
    batch = 16 if family == "qwen3_moe" else 8
    text = f'run_dir = "{tmp_path / name}"\n' + MODELS[family]
    text += f"""
[training]
max_steps = {STEPS}
global_batch_size = {batch}
micro_batch_size = 1
lr = 1e-2
min_lr = 1e-3
warmup_steps = 2
device = "cpu"

[data]
kind = "tokens"
path = "{TINY_TOKENS}"
seq_len = 16
{extra}"""
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return str(path)


def step_one_grads(config: str, overrides: list[str]) -> dict[str, torch.Tensor]:
    """Full gradients after the first forward/backward, keyed by canonical name (experts one by one)."""
    run = pretrain_lm.setup(load_pretrain_cfg(config, overrides))
    pretrain_lm.forward_backward(run, consumed=0)
    grads = {}
    for name, p in run.model.named_parameters():
        g = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        if ".mlp.experts." in name:
            offset = run.model.get_submodule(name.rsplit(".", 1)[0]).expert_offset
            grads |= {f"{name}.{offset + e}": g[e] for e in range(g.shape[0])}
        else:
            grads[name] = g
    return grads


def train_on_mesh(rank, world_size, config, overrides):
    os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"] = str(world_size), str(rank)
    losses = [r["loss"] for r in pretrain_lm.launch(load_pretrain_cfg(config, overrides + ["checkpoint.interval=0"]))]
    grads = step_one_grads(config, overrides + [f'run_dir="{config}.grads"'])
    return losses, grads


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """family -> (losses, step-1 gradients) on one process, computed on first use."""
    cache = {}

    def get(family: str):
        if family not in cache:
            tmp_path = tmp_path_factory.mktemp(f"reference-{family}")
            config = write_config(tmp_path, "ref", family)
            losses = [r["loss"] for r in pretrain_lm.launch(load_pretrain_cfg(config))]
            cache[family] = losses, step_one_grads(config, [f'run_dir="{tmp_path}/grads"'])
        return cache[family]

    return get


@pytest.fixture(scope="module")
def reference(references):
    return references("qwen3_moe")


def assert_matches_reference(reference, results):
    ref_losses, ref_grads = reference
    for losses, _ in results:
        rel = [abs(a - b) / abs(b) for a, b in zip(losses, ref_losses)]
        assert max(rel) < 1e-5, (losses, ref_losses)
    grads = {}
    for _, rank_grads in results:
        grads |= rank_grads
    assert grads.keys() == ref_grads.keys()
    for name, ref in ref_grads.items():
        rel = (grads[name] - ref).norm() / ref.norm().clamp_min(1e-30)
        assert rel < 1e-5, (name, float(rel))


MESHES = {
    "PP2": (2, ["distributed.pipeline_parallel_size=2"]),
    "EP2": (2, ["distributed.expert_parallel_size=2"]),
    "DP2": (2, []),
    "CP2": (2, ["distributed.context_parallel_size=2"]),
    "PP2xEP2": (4, ["distributed.pipeline_parallel_size=2", "distributed.expert_parallel_size=2"]),
    "CP2xEP2": (4, ["distributed.context_parallel_size=2", "distributed.expert_parallel_size=2"]),
    "PP2xCP2": (4, ["distributed.pipeline_parallel_size=2", "distributed.context_parallel_size=2"]),
    "PP2xDP2xEP2": (8, ["distributed.pipeline_parallel_size=2", "distributed.expert_parallel_size=2"]),
    "DP2xEP2-HSDP": (4, ["distributed.expert_parallel_size=2", "distributed.hsdp=true"]),
}
# Qwen3-MoE on every mesh; the other families on the pipeline with EP and on context parallelism (one fast each).
CASES = [("qwen3_moe", m) for m in MESHES] + [
    ("deepseek_v2", "PP2xEP2"),
    ("deepseek_v2", "CP2xEP2"),
    ("gpt_oss", "PP2xEP2"),
    ("gpt_oss", "CP2"),
    ("gpt_oss", "CP2xEP2"),
]
SLOW = {("qwen3_moe", m) for m in ["PP2xDP2xEP2", "PP2xCP2", "CP2xEP2", "DP2xEP2-HSDP"]}
SLOW |= {("deepseek_v2", "CP2xEP2"), ("gpt_oss", "PP2xEP2"), ("gpt_oss", "CP2xEP2")}


@pytest.mark.parametrize(
    "family,mesh", [pytest.param(*case, marks=pytest.mark.slow) if case in SLOW else case for case in CASES]
)
def test_mesh_matches_single_process(family, mesh, references, tmp_path):
    world, overrides = MESHES[mesh]
    config = write_config(tmp_path, mesh, family)
    results = run_in_processes(train_on_mesh, world, config, overrides, timeout_s=300)
    assert_matches_reference(references(family), results)


def train_with_checkpoints(rank, world_size, config, overrides):
    os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"] = str(world_size), str(rank)
    return [r["loss"] for r in pretrain_lm.launch(load_pretrain_cfg(config, overrides))]


def test_checkpoint_resumes_on_another_mesh(reference, tmp_path):
    """Save on PP2 x EP2 at step 2; resume on EP2 and on one process: steps 3-5 match the reference."""
    import shutil

    config = write_config(tmp_path, "saved")
    pp2ep2 = MESHES["PP2xEP2"][1] + ["checkpoint.interval=2", "checkpoint.keep_last=5"]
    run_in_processes(train_with_checkpoints, 4, config, pp2ep2, timeout_s=300)
    step2 = tmp_path / "saved" / "checkpoints" / "step-00000002"
    for name in ("ep2", "single"):
        (tmp_path / name / "checkpoints").mkdir(parents=True)
        shutil.copytree(step2, tmp_path / name / "checkpoints" / step2.name)
        (tmp_path / name / "checkpoints" / "latest").write_text(step2.name)
    ep2 = run_in_processes(train_with_checkpoints, 2, write_config(tmp_path, "ep2"), MESHES["EP2"][1], timeout_s=300)
    single = pretrain_lm.launch(load_pretrain_cfg(write_config(tmp_path, "single")))
    ref_losses = reference[0]
    for losses in [*ep2, [r["loss"] for r in single]]:
        assert len(losses) == STEPS - 2
        rel = [abs(a - b) / b for a, b in zip(losses, ref_losses[2:])]
        assert max(rel) < 1e-5, (losses, ref_losses)
