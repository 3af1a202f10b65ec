"""Every mesh computes what one process computes: per-step losses over 5 steps and every gradient after
one step, for a tiny fp32 Qwen3-MoE (relative differences under 1e-5), plus a checkpoint saved on one
mesh resumed on others. Several gloo processes on CPU, spawned by tests/distributed_helpers.py."""

import os

import pytest
import torch
from conftest import TINY_MODEL, TINY_TOKENS
from distributed_helpers import run_in_processes

from pithtrain.tasks import pretrain_lm
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

STEPS = 5


def write_config(tmp_path, name: str, extra: str = "") -> str:
    # 4 layers so that PP2 gives every chunk a layer; 16 sequences so that PP2 x DP2 x EP2 has 4 micro-batches.
    text = f'run_dir = "{tmp_path / name}"\n' + TINY_MODEL.replace("num_hidden_layers = 2", "num_hidden_layers = 4")
    text += f"""
[training]
max_steps = {STEPS}
global_batch_size = 16
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
def reference(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("reference")
    config = write_config(tmp_path, "ref")
    losses = [r["loss"] for r in pretrain_lm.launch(load_pretrain_cfg(config))]
    return losses, step_one_grads(config, [f'run_dir="{tmp_path}/grads"'])


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
}
SLOW = {"PP2xDP2xEP2", "PP2xCP2", "CP2xEP2"}


@pytest.mark.parametrize("mesh", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW else m for m in MESHES])
def test_mesh_matches_single_process(mesh, reference, tmp_path):
    world, overrides = MESHES[mesh]
    config = write_config(tmp_path, mesh)
    results = run_in_processes(train_on_mesh, world, config, overrides, timeout_s=300)
    assert_matches_reference(reference, results)


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
