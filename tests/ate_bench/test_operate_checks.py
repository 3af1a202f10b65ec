"""The operate tasks' checker pieces on small synthetic inputs: each condition passes a right input, fails a wrong one.

The checkers end to end (gold PASS, noop and wrong cases FAIL) are proven by `python -m ate_bench validate`.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ate_bench.validate import fails_for

OPERATE = Path(__file__).resolve().parents[2] / "tasks" / "operate"
sys.path.insert(0, str(OPERATE))
import operate_check as oc  # noqa: E402


def load(slug: str):
    spec = importlib.util.spec_from_file_location(f"check_{slug.replace('-', '_')}", OPERATE / slug / "check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_log(ws: Path, name: str, stamp: str, text: str) -> None:
    (ws / "artifacts").mkdir(exist_ok=True)
    (ws / "artifacts" / f"{name}-{stamp}.log").write_text(text)


def test_newest_log_and_exit_time(tmp_path):
    write_log(tmp_path, "train", "20260101-000000", "old\nexit-time: 1\n")
    write_log(tmp_path, "train", "20260102-000000", "step 1/5 loss 7.5 lr\n")
    write_log(tmp_path, "train-extra", "20260103-000000", "not a train log\nexit-time: 3\n")
    failures = []
    assert oc.read_log(tmp_path, "train", failures).startswith("step 1/5")
    assert failures and "exit-time" in failures[0]
    assert oc.read_log(tmp_path, "evaluate", failures) is None and "evaluate" in failures[-1]


def test_step_losses_and_check_steps():
    text = "step 1/3 loss 7.6 lr 1e-3\nstep 2/3 loss nan lr\nnoise\nstep 3/3 loss 7.1 lr\n"
    losses = oc.step_losses(text, "pithtrain")
    assert losses[1] == 7.6 and losses[3] == 7.1
    failures = []
    oc.check_steps(losses, 4, "log", failures)
    assert len(failures) == 2 and "[4]" in failures[0] and "non-finite" in failures[1]
    failures = []
    oc.check_steps({1: 7.0, 2: 6.9}, 2, "log", failures)
    assert failures == []


def test_getting_started_venv(tmp_path):
    gs = load("01-getting-started")
    venv = tmp_path / ".venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    inside = f"python-prefix: {venv}\ntorch-file: {venv}/lib/torch/__init__.py\n"
    assert gs.venv_failures(inside, tmp_path, "smoke") == []
    host_torch = f"python-prefix: {venv}\ntorch-file: /usr/lib/torch/__init__.py\n"
    assert "outside .venv" in gs.venv_failures(host_torch, tmp_path, "smoke")[0]
    assert gs.venv_failures(host_torch, tmp_path, "gpu1") == []  # no package index there: the host's torch
    other = "python-prefix: /usr\ntorch-file: /usr/lib/torch/__init__.py\n"
    assert "not .venv's" in gs.venv_failures(other, tmp_path, "smoke")[0]
    assert "python-prefix" in gs.venv_failures("step 1/5 loss 7\n", tmp_path, "smoke")[0]


def write_traces(ws: Path, ids: np.ndarray, w: np.ndarray, steps: int = 4) -> None:
    out = ws / "artifacts" / "routing-traces"
    out.mkdir(parents=True, exist_ok=True)
    for step in range(1, steps + 1):
        np.savez(out / f"step-{step:08d}.npz", expert_ids=np.roll(ids, step - 1, axis=1), gate_weights=w)


def routed(shape=(2, 3, 5), experts=8, k=2, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.random((*shape, experts)).argsort(-1)[..., :k].astype(np.int32)
    w = rng.dirichlet(np.ones(k), size=shape).astype(np.float32)
    return ids, w


def test_routing_schema(tmp_path):
    rt = load("03-routing-trace")
    ids, w = routed()
    write_traces(tmp_path, ids, w)
    failures = []
    assert rt.load_traces(tmp_path, (2, 3, 5, 2), 8, failures) is not None and failures == []
    for bad_ids, bad_w, reason in [
        (ids.astype(np.int64), w, "expected int32"),
        (np.where(ids == ids[..., :1], ids, ids[..., :1]), w, "same expert twice"),
        (ids + 8, w, "outside [0, 8)"),
        (ids, w * 0.5, "sum to"),
    ]:
        write_traces(tmp_path, bad_ids, bad_w)
        failures = []
        rt.load_traces(tmp_path, (2, 3, 5, 2), 8, failures)
        assert any(reason in f for f in failures), (reason, failures)
    write_traces(tmp_path, ids, w, steps=3)
    (tmp_path / "artifacts" / "routing-traces" / "step-00000004.npz").unlink()
    failures = []
    assert rt.load_traces(tmp_path, (2, 3, 5, 2), 8, failures) is None and "step-00000004" in failures[0]


@pytest.mark.parametrize("framework", ["pithtrain", "torchtitan", "megatron-lm"])
def test_routing_without_weights_fails(tmp_path, framework, capsys, monkeypatch):
    """gpu1: traces of the right shape but checkpoint/ without the weights make_checkpoint.py writes FAIL with the
    reason, not a traceback from loading the weights."""
    check = load("03-routing-trace")
    ids, w = routed(shape=(3, 8, 2048), experts=64, k=6)
    write_traces(tmp_path, ids, w)
    (tmp_path / "checkpoint").mkdir()
    shutil.copy(OPERATE / "03-routing-trace" / "prepare" / "gpu1" / "pithtrain" / "checkpoint" / "config.json",
                tmp_path / "checkpoint")  # fmt: skip
    argv = ["check.py", "--workspace", str(tmp_path), "--framework", framework, "--answer", "/dev/null"]
    monkeypatch.setattr(sys, "argv", [*argv, "--profile", "gpu1"])
    monkeypatch.chdir(tmp_path)
    assert check.main() == 1
    assert capsys.readouterr().out.splitlines() == [
        "FAIL: checkpoint/ holds no *.safetensors weights (the provided make_checkpoint.py or fetch.sh writes them): "
        "the routing cannot be recomputed"
    ]
    # random-trace FAILed so on gpu1 before it made the weights: validate now takes such a FAIL for an ERROR
    pattern = fails_for(OPERATE / "03-routing-trace" / "wrong" / framework / "random-trace.sh")
    assert pattern and not re.search(pattern, "checkpoint/ holds no *.safetensors weights")


@pytest.mark.parametrize("script", sorted(OPERATE.glob("*/wrong/*/*.sh")), ids=lambda p: "/".join(p.parts[-4:]))
def test_operate_wrong_cases_say_what_they_fail_for(script):
    """Each operate wrong case names, as `# FAILs for: <regex>`, the checker's reasons its mistake gives, each
    alternative a message of the task's checker: a FAIL for another reason (no weights made, a crash) is ERROR."""
    pattern = fails_for(script)
    assert pattern, f"{script} has no '# FAILs for:' line"
    source = (script.parents[2] / "check.py").read_text() + (OPERATE / "operate_check.py").read_text()
    for alternative in pattern.split("|"):
        assert alternative.strip(" ,") in source, (script, alternative)


def test_routing_agreement():
    rt = load("03-routing-trace")
    ids, w = routed(shape=(4, 64))
    swapped_ids, swapped_w = ids[..., ::-1], w[..., ::-1]  # top_k in another order is the same routing
    assert rt.agreement_failures(swapped_ids, swapped_w, ids, w, 1e-4) == []
    other_ids, other_w = routed(shape=(4, 64), seed=1)
    assert "not the model's routing" in rt.agreement_failures(other_ids, other_w, ids, w, 1e-4)[0]
    assert "gate weights differ" in rt.agreement_failures(ids, w[..., ::-1], ids, w, 1e-4)[0]


def op(name, ts, dur, tid=1):
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": tid}


def test_heavy_kernels_self_time():
    hk = load("04-heavy-kernels")
    # linear [0, 100) holds mm [10, 70) which holds copy [20, 30); another thread's mm [0, 50).
    ops = [op("aten::linear", 0, 100), op("aten::mm", 10, 60), op("aten::copy_", 20, 10), op("aten::mm", 0, 50, tid=2)]
    got = hk.cpu_self_times(ops)
    assert got == {"aten::linear": (0.04, 1), "aten::mm": (0.1, 2), "aten::copy_": (0.01, 1)}


def test_heavy_kernels_csv_against_profile(tmp_path):
    hk = load("04-heavy-kernels")
    agg = {"a": (5.0, 10), "b": (3.0, 3), "c": (2.0, 4), "d": (1.0, 1)}
    right = [("a", 5.0, 10, 0.5), ("b", 3.0, 3, 1.0), ("c", 2.0, 4, 0.5)]
    assert hk.compare(right, agg) == []
    assert "left out" in hk.compare([("b", 3.0, 3, 1.0), ("c", 2.0, 4, 0.5), ("d", 1.0, 1, 1.0)], agg)[0]
    assert "profile says" in hk.compare([("a", 9.0, 10, 0.9), *right[1:]], agg)[0]
    assert "no kernel" in hk.compare([("z", 5.0, 10, 0.5), *right[1:]], agg)[0]
    csv_file = tmp_path / "top-kernels.csv"
    csv_file.write_text("kernel_name,total_time_ms,instances,mean_time_ms\nb,3,3,1\na,5,10,0.5\nc,2,4,0.5\n")
    failures = []
    hk.read_csv(csv_file, failures)
    assert failures == ["top-kernels.csv's rows are not sorted by total_time_ms, heaviest first"]
    trace = tmp_path / "trace.json"
    kernel = {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 0, "dur": 2000}
    steps = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "ts": 0, "dur": 1} for i in (3, 4)]
    trace.write_text(json.dumps({"traceEvents": [kernel, kernel, op("aten::mm", 0, 9000), *steps]}))
    failures = []
    assert hk.from_trace(trace, failures) == {"gemm": (4.0, 2)}  # GPU kernels, not the CPU ops, when present
    assert "2 profiled steps" in failures[0]


@pytest.mark.parametrize("framework", ["pithtrain", "megatron-lm"])
@pytest.mark.parametrize("slug", ["01-getting-started", "02-train-evaluate", "03-routing-trace", "04-heavy-kernels"])
def test_empty_workspace_fails_without_error(tmp_path, slug, framework, capsys, monkeypatch):
    """noop: every checker FAILs an untouched workspace with reasons, never a traceback, on every framework."""
    check = load(slug)
    argv = ["check.py", "--workspace", str(tmp_path), "--framework", framework, "--answer", "/dev/null"]
    monkeypatch.setattr(sys, "argv", [*argv, "--profile", "smoke"])
    monkeypatch.chdir(tmp_path)
    if slug == "02-train-evaluate":  # the logit comparison needs transformers; its FAIL comes before it is imported
        pytest.importorskip("transformers")
    assert check.main() == 1
    out = capsys.readouterr().out.splitlines()
    assert out and all(line.startswith("FAIL: ") for line in out)


MEGATRON_TINY = dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2, first_k_dense_replace=1,
                     num_attention_heads=2, q_lora_rank=0, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8,
                     v_head_dim=16, n_routed_experts=4, n_shared_experts=2, num_experts_per_tok=2,
                     moe_intermediate_size=8, norm_topk_prob=False, rope_factor=40.0,
                     rope_original_max_position_embeddings=4096, max_position_embeddings=163840)  # fmt: skip


def megatron_state(hf: dict, grouped: bool = False) -> dict:
    """A tiny Megatron-Core GPTModel state dict written from transformers' DeepseekV2 tensors, the other way round from
    the checker (its SequentialMLP names, or GroupedMLP's weight1/weight2 when `grouped`), with the extra states."""
    import torch

    out = {"embedding.word_embeddings.weight": hf["model.embed_tokens.weight"],
           "decoder.final_layernorm.weight": hf["model.norm.weight"], "output_layer.weight": hf["lm_head.weight"],
           "output_layer._extra_state": None}  # fmt: skip
    for i in range(MEGATRON_TINY["num_hidden_layers"]):
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        for mm, hh in (("input_layernorm", "input_layernorm"), ("pre_mlp_layernorm", "post_attention_layernorm"),
                       ("self_attention.linear_q_proj", "self_attn.q_proj"),
                       ("self_attention.linear_kv_down_proj", "self_attn.kv_a_proj_with_mqa"),
                       ("self_attention.kv_layernorm", "self_attn.kv_a_layernorm"),
                       ("self_attention.linear_kv_up_proj", "self_attn.kv_b_proj"),
                       ("self_attention.linear_proj", "self_attn.o_proj")):  # fmt: skip
            out[f"{m}{mm}.weight"] = hf[f"{h}{hh}.weight"]
        mlps = ["mlp."] if h + "mlp.gate_proj.weight" in hf else ["mlp.shared_experts."]
        for mlp in mlps:
            gate_up = [hf[f"{h}{mlp}gate_proj.weight"], hf[f"{h}{mlp}up_proj.weight"]]
            out[f"{m}{mlp}linear_fc1.weight"] = torch.cat(gate_up)
            out[f"{m}{mlp}linear_fc2.weight"] = hf[f"{h}{mlp}down_proj.weight"]
            out[f"{m}{mlp}linear_fc1._extra_state"] = None
        if h + "mlp.gate.weight" in hf:
            out[m + "mlp.router.weight"] = hf[h + "mlp.gate.weight"]
            fc1, fc2 = hf[h + "mlp.experts.gate_up_proj"], hf[h + "mlp.experts.down_proj"]  # (E, 2I, H), (E, H, I)
            if grouped:
                out[m + "mlp.experts.weight1"] = fc1.transpose(1, 2).reshape(fc1.shape[2], -1)  # raw view (E, H, 2I)
                out[m + "mlp.experts.weight2"] = fc2.transpose(1, 2).reshape(-1, fc2.shape[1])
            for e in range(fc1.shape[0] if not grouped else 0):
                out[f"{m}mlp.experts.local_experts.{e}.linear_fc1.weight"] = fc1[e]
                out[f"{m}mlp.experts.local_experts.{e}.linear_fc2.weight"] = fc2[e]
    return out


@pytest.mark.parametrize("grouped", [False, True])
def test_megatron_export_mapping(grouped):
    """operate-02's own Megatron -> transformers mapping inverts a Megatron state dict exactly (SequentialMLP and
    GroupedMLP experts, the fused [gate; up] fc1); a swapped fc1 maps to other weights."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM

    check = load("02-train-evaluate")
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(check.reference_config(MEGATRON_TINY)).state_dict()
    mapped = check.megatron_as_hf(megatron_state(hf, grouped), MEGATRON_TINY["n_routed_experts"])
    assert sorted(mapped) == sorted(hf)
    assert all(torch.equal(mapped[k], hf[k].float()) for k in hf)
    state = megatron_state(hf, grouped)
    state["decoder.layers.0.mlp.linear_fc1.weight"] = state["decoder.layers.0.mlp.linear_fc1.weight"].flip(0)
    assert not torch.equal(check.megatron_as_hf(state, 4)["model.layers.0.mlp.gate_proj.weight"], hf[
        "model.layers.0.mlp.gate_proj.weight"])  # fmt: skip
    with pytest.raises(KeyError):
        check.megatron_as_hf({**state, "decoder.layers.0.mlp.unknown.weight": torch.zeros(1)}, 4)


@pytest.fixture
def pinned_megatron_unloaded():
    """The pinned megatron that operate_check imports stays out of the other tests' way."""
    path = list(sys.path)
    yield
    sys.path[:] = path
    oc.PINNED.clear()
    for name in [n for n in sys.modules if n == "megatron" or n.startswith("megatron.")]:
        del sys.modules[name]


def tiny_megatron_run(ws: Path):
    """A tiny model's step-25 checkpoint in Megatron's torch format under ws/artifacts/checkpoint and its bf16 Hugging
    Face export in ws/artifacts/hf-export, as operate-02's megatron-lm gold leaves them: (saved arguments, state). Its
    weights are drawn from Megatron-LM's default --seed, 1234."""
    import argparse

    import torch
    from transformers import AutoModelForCausalLM

    check = load("02-train-evaluate")
    torch.manual_seed(1234)
    hf = AutoModelForCausalLM.from_config(check.reference_config(MEGATRON_TINY))
    run = argparse.Namespace(**check.MLM_RUN, **check.megatron_shape(MEGATRON_TINY))
    # what the gold's export_hf.py reads besides
    run.moe_router_num_groups, run.init_method_std = None, 0.02
    run.max_position_embeddings = MEGATRON_TINY["max_position_embeddings"]
    out = ws / "artifacts" / "checkpoint" / "iter_0000025" / "mp_rank_00"
    out.mkdir(parents=True)
    state = megatron_state({k: v.to(torch.bfloat16) for k, v in hf.state_dict().items()})
    torch.save({"args": run, "iteration": 25, "checkpoint_version": 3.0, "model": state}, out / "model_optim_rng.pt")
    (ws / "artifacts" / "checkpoint" / "latest_checkpointed_iteration.txt").write_text("25")
    hf.to(torch.bfloat16).save_pretrained(ws / "artifacts" / "hf-export")
    return run, state


def test_megatron_checkpoint_against_export(tmp_path, pinned_megatron_unloaded):
    """operate-02's megatron-lm comparison on a tiny torch-format checkpoint: its own export PASSes, a fresh model's
    FAILs, another iteration FAILs. Needs Megatron-LM's pin (the harness's mirror) to read the pickled arguments."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if isinstance(oc.pinned_megatron(), str):
        pytest.skip(f"no Megatron-LM {oc.MEGATRON_COMMIT} (mirror, carried archive or ATE_MEGATRON_SOURCE)")
    from transformers import AutoModelForCausalLM

    check = load("02-train-evaluate")
    run, state = tiny_megatron_run(tmp_path)
    out = tmp_path / "artifacts" / "checkpoint" / "iter_0000025" / "mp_rank_00"
    assert check.megatron_logits_failure(tmp_path, MEGATRON_TINY) is None
    AutoModelForCausalLM.from_config(check.reference_config(MEGATRON_TINY)).save_pretrained(
        tmp_path / "artifacts" / "hf-export"
    )
    assert "not the trained model" in check.megatron_logits_failure(tmp_path, MEGATRON_TINY)
    (tmp_path / "artifacts" / "checkpoint" / "latest_checkpointed_iteration.txt").write_text("20")
    assert "not 25" in check.megatron_logits_failure(tmp_path, MEGATRON_TINY)
    (tmp_path / "artifacts" / "checkpoint" / "latest_checkpointed_iteration.txt").write_text("25")
    state["embedding.word_embeddings.weight"] = state["embedding.word_embeddings.weight"][:200]  # the tokenizer's rows
    torch.save({"args": run, "iteration": 25, "checkpoint_version": 3.0, "model": state}, out / "model_optim_rng.pt")
    assert "not the provided model" in check.megatron_logits_failure(tmp_path, MEGATRON_TINY)


def test_megatron_routing_margin():
    """operate-03's megatron-lm agreement: the recomputed top-k passes, near ties may flip, a shuffled or random trace
    FAILs, and logits with no clear top-k FAIL as a check not made."""
    check = load("03-routing-trace")
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 64, 16)).astype(np.float32)
    ids = np.argsort(-logits, -1)[..., :6].astype(np.int32)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    w = np.take_along_axis(p, ids, -1)
    w = (w / w.sum(-1, keepdims=True)).astype(np.float32)
    assert check.margin_failures(ids, w, logits, 6, 1e-4) == []
    z = np.sort(logits, -1)[..., ::-1]
    tie = (z[..., 5] - z[..., 6]) < 0.05 * logits.std(-1)  # near ties: a bf16 run may pick the 7th instead
    flipped = ids.copy()
    flipped[tie, 5] = np.argsort(-logits, -1)[..., 6][tie]
    assert tie.any() and check.margin_failures(flipped, w, logits, 6, 1e-4) == []
    shuffled = ids.reshape(-1, 6)[rng.permutation(128)].reshape(ids.shape)
    assert "not the model's routing" in check.margin_failures(shuffled, w, logits, 6, 1e-4)[0]
    assert "cannot be made" in check.margin_failures(ids, w, np.zeros_like(logits), 6, 1e-4)[0]


# Megatron-LM's wrong cases (wrong/megatron-lm/*.sh) run on the gpu1 profile only, where Megatron needs CUDA. Here each
# runs as validate runs it, with the GPU run replaced by a stand-in that leaves outputs of the gold's shapes and formats
# (a copy of the task's gold folder whose solve.sh, or the workspace's pretrain_gpt.py or make_checkpoint.py, is that
# stand-in), and the checker's own functions judge what the wrong case leaves.
MEGATRON_WRONG = {slug: sorted(p.name for p in (OPERATE / slug / "wrong" / "pithtrain").glob("*.sh")) for slug in (
    "01-getting-started", "02-train-evaluate", "03-routing-trace", "04-heavy-kernels")}  # fmt: skip


def megatron_script(tmp: Path, slug: str, case: str, ws: Path, profile: str = "gpu1", gold: str | None = None):
    """Run the task's megatron-lm gold (`case` "gold") or its one wrong case ("wrong") in ws as validate does (`bash
    SCRIPT`, GOLD_DIR its folder, ATE_PROFILE), from a copy of the task's gold and wrong folders under tmp; `gold`, when
    given, replaces the copy's solve.sh."""
    task = tmp / "task"
    if not task.exists():
        for part in ("wrong", "gold"):
            shutil.copytree(OPERATE / slug / part / "megatron-lm", task / part / "megatron-lm")
    if gold is not None:
        (task / "gold" / "megatron-lm" / "solve.sh").write_text(gold)
    folder = task / case / "megatron-lm"
    (script,) = [folder / "solve.sh"] if case == "gold" else folder.glob("*.sh")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # golds call `python`
    env = {**os.environ, "GOLD_DIR": str(script.parent), "ATE_PROFILE": profile, "PATH": path}
    return subprocess.run(["bash", str(script)], cwd=ws, env=env, capture_output=True, text=True, timeout=600)


def run_check(slug: str, ws: Path, profile: str, monkeypatch, capsys) -> tuple[int, list[str]]:
    """The task's checker on ws for megatron-lm: (exit status, its output lines)."""
    check = load(slug)
    argv = ["check.py", "--workspace", str(ws), "--framework", "megatron-lm", "--answer", "/dev/null"]
    monkeypatch.setattr(sys, "argv", [*argv, "--profile", profile])
    monkeypatch.chdir(ws)
    capsys.readouterr()
    code = check.main()
    return code, capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("slug", sorted(MEGATRON_WRONG))
def test_megatron_wrong_cases_run_on_gpu1_only(tmp_path, slug):
    """Each task has pithtrain's wrong cases for megatron-lm too; each parses, and as the golds do it exits 2 with a
    one-line reason on smoke and paper, touching nothing; its header has validate record those cells not run."""
    from ate_bench.validate import near_miss_elsewhere

    scripts = sorted((OPERATE / slug / "wrong" / "megatron-lm").glob("*.sh"))
    assert [p.name for p in scripts] == MEGATRON_WRONG[slug]
    for script in scripts:
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
        assert near_miss_elsewhere(script, "gpu1") == ""
        ws = tmp_path / "ws"
        ws.mkdir()
        for profile in ("smoke", "paper"):
            assert near_miss_elsewhere(script, profile).startswith("a near miss only on gpu1: ")
            done = megatron_script(tmp_path, slug, "wrong", ws, profile)
            assert done.returncode == 2 and done.stdout == "", (profile, done)
            assert len(done.stderr.strip().splitlines()) == 1 and not any(ws.iterdir()), (profile, done.stderr)


STUB_PRETRAIN_GPT = """import sys

iters = int(sys.argv[sys.argv.index("--train-iters") + 1])
for i in range(1, iters + 1):  # the line Megatron-LM's training_log prints at --log-interval 1
    print(f" [2026-01-01 00:00:0{i}.000000] iteration {i:8d}/{iters:8d} | consumed samples: {8 * i:12d} | "
          f"elapsed time per iteration (ms): 900.0 | learning rate: 3.000000E-04 | global batch size:     8 | "
          f"lm loss: {11.9 - 0.1 * i:.6E} | loss scale: 1.0 | grad norm: 9.000 |", flush=True)
"""


def test_megatron_skip_steps(tmp_path, monkeypatch, capsys):
    """operate-01's skip-steps on gpu1, with a pretrain_gpt.py that prints Megatron's iteration lines in place of the
    GPU run: the gold, run the same way, PASSes; the wrong case FAILs on its edit of train.sh and the 3 steps it
    drops. torch.distributed.run launches the stand-in on the CPU."""
    provided = OPERATE / "01-getting-started" / "prepare" / "gpu1" / "megatron-lm"
    verdicts = {}
    for case in ("gold", "wrong"):
        ws = tmp_path / case
        ws.mkdir()
        for name in ("train.sh", "model_args.sh"):
            shutil.copy(provided / name, ws / name)
        (ws / "pretrain_gpt.py").write_text(STUB_PRETRAIN_GPT)
        done = megatron_script(tmp_path, "01-getting-started", case, ws)
        assert done.returncode == 0, (case, done.stdout[-2000:], done.stderr[-2000:])
        verdicts[case] = run_check("01-getting-started", ws, "gpu1", monkeypatch, capsys)
    assert verdicts["gold"] == (0, ["PASS"])
    assert "--train-iters 2 " in (tmp_path / "wrong" / "train.sh").read_text()
    assert verdicts["wrong"] == (1, [
        "FAIL: train.sh differs from the provided one: run it unmodified",
        "FAIL: the newest train log shows no loss for step(s) [3, 4, 5] (expected steps 1 to 5)",
    ])  # fmt: skip


def test_megatron_fresh_export(tmp_path, pinned_megatron_unloaded):
    """operate-02's fresh-export on a tiny torch-format checkpoint, with the gold's export_hf.py standing in for the
    gold (its GPU run left that checkpoint): the checker's comparison passes the gold's export and FAILs the one the
    wrong case puts in its place (config.json and the tokenizer's files as before) as not the trained model."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if isinstance(oc.pinned_megatron(), str):
        pytest.skip(f"no Megatron-LM {oc.MEGATRON_COMMIT} (mirror, carried archive or ATE_MEGATRON_SOURCE)")
    check = load("02-train-evaluate")
    ws = tmp_path / "ws"
    tiny_megatron_run(ws)
    export = ws / "artifacts" / "hf-export"
    shutil.rmtree(export)
    tokenizer = OPERATE / "02-train-evaluate" / "data" / "tokenizer"
    gold = f"""echo "$GOLD_DIR" >gold-dir.txt
python "$GOLD_DIR/export_hf.py" --checkpoint artifacts/checkpoint --tokenizer {tokenizer} --output artifacts/hf-export
"""
    done = megatron_script(tmp_path, "02-train-evaluate", "gold", ws, gold=gold)
    assert done.returncode == 0, done.stderr[-2000:]
    assert check.megatron_logits_failure(ws, MEGATRON_TINY) is None
    config = json.loads((export / "config.json").read_text())
    done = megatron_script(tmp_path, "02-train-evaluate", "wrong", ws)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path((ws / "gold-dir.txt").read_text().strip()).resolve() == tmp_path / "task" / "gold" / "megatron-lm"
    assert all((export / f.name).read_bytes() == f.read_bytes() for f in tokenizer.iterdir())
    fresh = json.loads((export / "config.json").read_text())
    assert all(
        fresh[k] == v for k, v in config.items() if k not in ("torch_dtype", "rope_theta", "transformers_version")
    )
    assert "not the trained model" in check.megatron_logits_failure(ws, MEGATRON_TINY)


def test_megatron_random_trace(tmp_path):
    """operate-03's random-trace with gpu1's model_args.sh (make_checkpoint.py stood in for): four traces the checker's
    schema accepts at gpu1's shape, and on a tiny DeepseekV2 of gpu1's routing (64 experts, top-6) the checker's own
    router recompute and margin agreement FAIL step 1's as not the model's routing, while the recompute's own top-6
    passes."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import tomllib

    from transformers import AutoModelForCausalLM

    check = load("03-routing-trace")
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(OPERATE / "03-routing-trace" / "prepare" / "gpu1" / "megatron-lm" / "model_args.sh", ws)
    (ws / "make_checkpoint.py").write_text("open('made', 'w').close()\n")
    done = megatron_script(tmp_path, "03-routing-trace", "wrong", ws)
    assert done.returncode == 0 and (ws / "made").is_file(), done.stderr[-2000:]
    cfg = tomllib.loads((OPERATE / "03-routing-trace" / "prepare" / "gpu1" / "pithtrain" / "routing.toml").read_text())
    m, t = cfg["model"], cfg["training"]  # the shape as the checker's main() reads it
    shape = (m["num_hidden_layers"] - m["first_k_dense_replace"], t["global_batch_size"], cfg["data"]["seq_len"])
    failures = []
    traces = check.load_traces(ws, (*shape, m["num_experts_per_tok"]), m["n_routed_experts"], failures)
    assert traces is not None and failures == []
    tiny = dict(MEGATRON_TINY, vocab_size=2048, n_routed_experts=m["n_routed_experts"])
    tiny["num_experts_per_tok"] = m["num_experts_per_tok"]
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(load("02-train-evaluate").reference_config(tiny)).save_pretrained(tmp_path / "hf")
    ids = np.random.default_rng(0).integers(0, 2048, size=shape[1:])
    logits = check.hf_first_moe_router(tmp_path / "hf", tmp_path / "hf", ids)
    k, tol = m["num_experts_per_tok"], check.WEIGHT_TOL["gpu1"]
    why = check.margin_failures(traces[0][0][0], traces[0][1][0], logits, k, tol)
    assert len(why) == 1 and "not the model's routing" in why[0], why
    top = np.argsort(-logits, -1)[..., :k]
    p = np.take_along_axis(np.exp(logits - logits.max(-1, keepdims=True)), top, -1)
    assert check.margin_failures(top.astype(np.int32), (p / p.sum(-1, keepdims=True)).astype(np.float32), logits, k,
                                 tol) == []  # fmt: skip


def kernel_trace() -> list[dict]:
    """A GPU step's trace as torch.profiler writes it, in small: operators (`cpu_op`) on a forward and a backward
    thread, the kernel launches inside them (`cuda_runtime`) and the kernels (`kernel`), tied by correlation ids."""
    events, launches = [], 0
    for tid, ops in ((1, [("aten::linear", 0, 100, []), ("aten::addmm", 10, 80, [(20, "gemm_nn", 500)]),
                          ("aten::relu", 110, 20, [(115, "relu_kernel", 40)]),
                          ("aten::add_", 140, 20, [(145, "add_kernel", 30)])]),
                     (2, [("autograd::engine::evaluate_function: AddmmBackward0", 0, 300, [(297, "add_kernel", 30)]),
                          ("AddmmBackward0", 5, 290, [(250, "reduce_kernel", 20)]),
                          ("aten::mm", 10, 100, [(20, "gemm_nn", 450)]),
                          ("aten::mm", 120, 100, [(130, "gemm_nt", 400)])])):  # fmt: skip
        for name, ts, dur, launched in ops:
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur})
            for at, kernel, us in launched:
                launches += 1
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
                               "ts": at, "dur": 3, "args": {"correlation": launches}})  # fmt: skip
                events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 1000 * launches,
                               "dur": us, "args": {"correlation": launches, "stream": 7}})  # fmt: skip
    return events


def cpu_trace(path: Path) -> None:
    """A real torch.profiler Chrome trace of a small MLP's forward and backward on the CPU (no kernels)."""
    import torch

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
    x = torch.randn(64, 256)
    mlp(x).square().mean().backward()  # warm-up
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            mlp(x).square().mean().backward()
    prof.export_chrome_trace(str(path))


def test_megatron_not_top3(tmp_path, monkeypatch, capsys):
    """operate-04's not-top3 after the gold's top_kernels.py (the gold's second half) on a kept trace. On a GPU step's
    trace the gold's CSV PASSes and the wrong case's, its operators by inclusive kernel time, FAILs as no kernels; on
    a real CPU trace (operators by self time) its operators by inclusive duration FAIL against the self times."""
    pytest.importorskip("torch")
    (tmp_path / "gpu.json").write_text(json.dumps({"traceEvents": kernel_trace()}))
    cpu_trace(tmp_path / "cpu.json")
    out = Path("artifacts") / "heavy-kernels"
    for kind in ("gpu", "cpu"):
        gold = f'python "$GOLD_DIR/top_kernels.py" {tmp_path / kind}.json\n'
        verdicts = {}
        for case in ("gold", "wrong"):
            ws = tmp_path / f"{kind}-{case}"
            ws.mkdir()
            done = megatron_script(tmp_path, "04-heavy-kernels", case, ws, gold=gold)
            assert done.returncode == 0, (kind, case, done.stderr[-2000:])
            verdicts[case] = run_check("04-heavy-kernels", ws, "gpu1", monkeypatch, capsys)
            rows = (ws / out / "top-kernels.csv").read_text().splitlines()
            verdicts[case] += (rows,)
        assert verdicts["gold"][:2] == (0, ["PASS"]), (kind, verdicts["gold"])
        code, lines, rows = verdicts["wrong"]
        assert code == 1 and lines and all(line.startswith("FAIL: ") for line in lines), (kind, lines)
        if kind == "gpu":
            assert rows[1:] == ["autograd::engine::evaluate_function: AddmmBackward0,0.9000,1,0.9000",
                                "AddmmBackward0,0.8700,1,0.8700", "aten::mm,0.8500,2,0.4250"]  # fmt: skip
            assert all("is no kernel of the kept profile" in line for line in lines[:3]), lines
        else:
            assert any("the profile says" in line or "left out" in line for line in lines), lines
