"""The operate tasks' checker pieces on small synthetic inputs: each condition passes a right input, fails a wrong one.

The checkers end to end (gold PASS, noop and wrong cases FAIL) are proven by `python -m ate_bench validate`.
"""

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

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


def test_megatron_checkpoint_against_export(tmp_path, pinned_megatron_unloaded):
    """operate-02's megatron-lm comparison on a tiny torch-format checkpoint: its own export PASSes, a fresh model's
    FAILs, another iteration FAILs. Needs Megatron-LM's pin (the harness's mirror) to read the pickled arguments."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if isinstance(oc.pinned_megatron(), str):
        pytest.skip(f"no Megatron-LM {oc.MEGATRON_COMMIT} (mirror, carried archive or ATE_MEGATRON_SOURCE)")
    import argparse

    from transformers import AutoModelForCausalLM

    check = load("02-train-evaluate")
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(check.reference_config(MEGATRON_TINY))
    run = argparse.Namespace(**check.MLM_RUN, **check.megatron_shape(MEGATRON_TINY))
    out = tmp_path / "artifacts" / "checkpoint" / "iter_0000025" / "mp_rank_00"
    out.mkdir(parents=True)
    state = megatron_state({k: v.to(torch.bfloat16) for k, v in hf.state_dict().items()})
    torch.save({"args": run, "iteration": 25, "checkpoint_version": 3.0, "model": state}, out / "model_optim_rng.pt")
    (tmp_path / "artifacts" / "checkpoint" / "latest_checkpointed_iteration.txt").write_text("25")
    hf.to(torch.bfloat16).save_pretrained(tmp_path / "artifacts" / "hf-export")
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
