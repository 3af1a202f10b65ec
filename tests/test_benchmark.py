"""benchmarks/throughput.py: the CPU smoke run end to end (pithtrain's CLI, metrics.jsonl, the JSONL record),
and the pieces the GPU runs rely on that can be checked without a GPU: the configurations, the run
order, TorchTitan's log-line parser and the flavor module written for it."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "throughput.py"
spec = importlib.util.spec_from_file_location("throughput", SCRIPT)
throughput = importlib.util.module_from_spec(spec)
spec.loader.exec_module(throughput)

RECORD_FIELDS = {
    "schema", "smoke", "call_id", "date", "framework", "framework_version", "variant", "label", "config",
    "config_table", "routing", "gpus", "mesh", "device_name", "seq_len", "global_batch_size", "micro_batch_size",
    "warmup_steps", "timed_steps", "flops_per_token", "peak_spec_tflops", "peak_measured_tflops", "git_commit",
    "git_dirty", "torch_version", "status", "error", "tokens_per_s_per_gpu", "mfu_spec", "mfu_measured_peak",
    "peak_mem_gib", "peak_mem_kind", "peak_mem_nvidia_smi_gib", "step_times_s", "losses", "log",
    "peak_measured_per_gpu_tflops",
}  # fmt: skip


def test_profile_step_smoke(tmp_path):
    """benchmarks/profile_step.py runs the trainer's step under the profiler and writes its report (CPU)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, str(SCRIPT.parent / "profile_step.py"), "--smoke", "--steps", "1,1", "--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    (report,) = tmp_path.glob("profile-smoke-tiny-pp1-ep1-eager.txt")
    assert "step wall time" in report.read_text()


def test_smoke_run_writes_a_labelled_record(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, str(SCRIPT), "--smoke", "--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    (jsonl,) = tmp_path.glob("*.jsonl")
    (rec,) = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert RECORD_FIELDS <= rec.keys(), RECORD_FIELDS - rec.keys()
    assert rec["smoke"] is True and rec["status"] == "ok", rec["error"]
    assert (rec["framework"], rec["config"], rec["routing"], rec["gpus"]) == ("pithtrain", "smoke-tiny", "natural", 1)
    assert rec["schema"] == throughput.SCHEMA and rec["torch_version"] and len(rec["git_commit"]) >= 7
    assert len(rec["step_times_s"]) == rec["timed_steps"] == 2 and rec["warmup_steps"] == 1
    tokens_per_gpu = rec["global_batch_size"] * rec["seq_len"]
    median = sorted(tokens_per_gpu / t for t in rec["step_times_s"])
    assert math.isclose(rec["tokens_per_s_per_gpu"], sum(median) / 2, rel_tol=1e-3)
    assert rec["mfu_spec"] is None and rec["peak_spec_tflops"] is None  # no MFU on a CPU
    assert len(rec["losses"]) == 3 and all(math.isfinite(x) for x in rec["losses"])
    assert (tmp_path / f"logs-{rec['call_id']}" / rec["log"]).is_file()
    assert "pithtrain" in res.stdout.splitlines()[-1]  # the summary table comes last


def test_first_local_config_is_the_issue_shape():
    cfg = throughput.load_config("qwen3-30b-a3b-4l")
    assert cfg["model"] == {
        "family": "qwen3_moe", "vocab_size": 151936, "hidden_size": 2048, "num_hidden_layers": 4,
        "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
        "num_experts_per_tok": 8, "moe_intermediate_size": 768, "tie_word_embeddings": False,
    }  # fmt: skip
    assert (cfg["seq_len"], cfg["sequences_per_gpu"], cfg["micro_batch_size"]) == (4096, 4, 4)
    assert [throughput.mesh_of(m)["ep"] for m in cfg["meshes"]] == [1, 2]


def test_every_config_loads_and_its_meshes_divide():
    import tomllib

    for name in tomllib.loads(throughput.CONFIGS.read_text()):
        cfg = throughput.load_config(name)
        for m in cfg["meshes"]:
            mesh = throughput.mesh_of(m)
            assert throughput.global_batch(cfg, mesh["gpus"]) % (mesh["dp"] * mesh["ep"] * cfg["micro_batch_size"]) == 0
        assert throughput.flops_per_token(cfg) > 0


def test_runs_alternate_between_frameworks():
    meshes = [{"gpus": 1}, {"gpus": 2}]
    order = [(m["gpus"], f) for m, f, _ in throughput.plan(meshes, ["a", "b", "c"], ["natural"], 2)]
    assert order == [(1, "a"), (1, "b"), (1, "c"), (1, "b"), (1, "c"), (1, "a")] + [
        (2, "a"), (2, "b"), (2, "c"), (2, "b"), (2, "c"), (2, "a")
    ]  # fmt: skip


def test_torchtitan_log_lines_count_once_per_step():
    def line(rank, step, tps):
        prefix = "" if rank is None else f"[rank{rank}]:"
        return (
            f"{prefix}[titan] 2026-11-30 09:00:00,000 - root - INFO - step: {step:2}  loss: 11.93251  "
            f"grad_norm:  1.2345  memory: 61.20GiB(43.03%)  tps: {tps:,}  tflops: 215.11  mfu: 21.75%"
        )

    two_ranks = "\n".join([line(1, 1, 5), line(0, 1, 60_412), "noise", line(0, 2, 61_000), line(1, 2, 7)])
    assert throughput.torchtitan_steps(two_ranks) == [(1, 11.93251, 61.2, 60412.0), (2, 11.93251, 61.2, 61000.0)]
    unprefixed = "\n".join([line(None, 1, 60_412), line(None, 1, 59_000), line(None, 2, 61_000)])
    assert [s[0] for s in throughput.torchtitan_steps(unprefixed)] == [1, 2]


def test_torchtitan_flavor_module_matches_the_shape(tmp_path):
    cfg = throughput.load_config("qwen3-30b-a3b-4l")
    throughput.torchtitan_flavor_module(cfg, tmp_path)
    text = (tmp_path / "pithbench_flavor.py").read_text()
    compile(text, "pithbench_flavor.py", "exec")
    for expected in ("n_layers=4", "dim=2048", "n_heads=32", "n_kv_heads=4", "moe_inter_dim=768", "top_k=8"):
        assert expected in text
    assert "num_experts=128" in text and "enable_weight_tying=False" in text and "vocab_size=151936" in text


def flavor_call(text: str) -> tuple[set[str], str, dict]:
    """The generated flavor module without importing TorchTitan: the names it imports, the flavor table it
    assigns to, and the literal keyword arguments of the model-args call (a nested MoEArgs call as a dict)."""
    import ast

    tree = ast.parse(text)
    imported = {f"{n.module}.{a.name}" for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    (assign,) = [n for n in tree.body if isinstance(n, ast.Assign)]
    target = assign.targets[0]
    assert isinstance(target, ast.Subscript) and ast.literal_eval(target.slice) == throughput.TT_FLAVOR

    def kwargs(call: ast.Call) -> dict:
        return {
            k.arg: kwargs(k.value) if isinstance(k.value, ast.Call) else ast.literal_eval(k.value)
            for k in call.keywords
        }

    return imported, f"{target.value.id}:{assign.value.func.id}", kwargs(assign.value)


def test_deepseek_local_config_is_the_v2_lite_shape():
    cfg = throughput.load_config("deepseek-v2-lite-6l")
    assert cfg["model"] == {
        "family": "deepseek_v2", "vocab_size": 102400, "hidden_size": 2048, "intermediate_size": 10944,
        "num_hidden_layers": 6, "first_k_dense_replace": 1, "num_attention_heads": 16, "q_lora_rank": 0,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6, "moe_intermediate_size": 1408,
        "scoring_func": "softmax", "topk_method": "greedy", "norm_topk_prob": False, "routed_scaling_factor": 1.0,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_factor": 1.0, "tie_word_embeddings": False,
    }  # fmt: skip
    assert (cfg["seq_len"], cfg["sequences_per_gpu"], cfg["micro_batch_size"]) == (4096, 4, 4)
    assert [throughput.mesh_of(m)["ep"] for m in cfg["meshes"]] == [1, 2]


def test_torchtitan_flavor_module_names_each_familys_classes(tmp_path):
    qwen = throughput.load_config("qwen3-30b-a3b-4l")
    assert throughput.torchtitan_flavor_module(qwen, tmp_path) == "qwen3"
    imported, target, args = flavor_call((tmp_path / "pithbench_flavor.py").read_text())
    assert target == "qwen3_args:Qwen3ModelArgs" and "torchtitan.models.qwen3.qwen3_args" in imported
    assert "torchtitan.models.qwen3.model.args.Qwen3ModelArgs" in imported
    assert args["n_layers"] == 4 and args["moe_args"]["num_experts"] == 128

    ds = throughput.load_config("deepseek-v2-lite-6l")
    assert throughput.torchtitan_flavor_module(ds, tmp_path) == "deepseek_v3"
    imported, target, args = flavor_call((tmp_path / "pithbench_flavor.py").read_text())
    assert target == "deepseekv3_args:DeepSeekV3ModelArgs"
    assert {"torchtitan.models.deepseek_v3.deepseekv3_args", "torchtitan.models.moe.MoEArgs"} <= imported
    assert "torchtitan.models.deepseek_v3.model.args.DeepSeekV3ModelArgs" in imported
    moe = args.pop("moe_args")
    assert args == {
        "vocab_size": 102400, "max_seq_len": 4096, "dim": 2048, "inter_dim": 10944, "moe_inter_dim": 1408,
        "n_layers": 6, "n_dense_layers": 1, "n_heads": 16, "norm_eps": 1e-6, "q_lora_rank": 0, "kv_lora_rank": 512,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "attn_type": "sdpa",
        "attn_mask_type": "causal", "original_seq_len": 4096, "rope_theta": 10000.0, "rope_factor": 1.0,
    }  # fmt: skip
    assert moe == {
        "num_experts": 64, "num_shared_experts": 2, "top_k": 6, "score_func": "softmax", "route_norm": False,
        "route_scale": 1.0, "score_before_experts": False, "load_balance_coeff": None,
    }  # fmt: skip


def test_torchtitan_side_refuses_what_its_deepseek_model_cannot_match(tmp_path):
    import pytest

    ds = throughput.load_config("deepseek-v2-lite-6l")
    for change, reason in (
        ({"rope_factor": 40.0}, "rope_factor"),
        ({"topk_method": "group_limited_greedy", "n_group": 8, "topk_group": 3}, "topk_method"),
        ({"tie_word_embeddings": True}, "tie_word_embeddings"),
        ({"family": "gpt_oss"}, "gpt_oss"),
    ):
        cfg = dict(ds, model=ds["model"] | change)
        with pytest.raises(NotImplementedError, match=reason):
            throughput.torchtitan_flavor_module(cfg, tmp_path)


def test_megatron_spec_is_the_configs_shape_and_mesh():
    """The spec throughput.py hands benchmarks/megatron_core_run.py: pithtrain's field names, no others."""
    cfg = throughput.load_config("qwen3-30b-a3b-4l")
    mesh = throughput.mesh_of(cfg["meshes"][1])
    spec = throughput.megatron_spec(cfg, mesh, "balanced", (3, 8))
    model = {k: v for k, v in cfg["model"].items() if k != "family"}
    assert {k: spec[k] for k in model} == model
    assert spec["ep"] == 2 and spec["sequences_per_gpu"] == 4 and spec["seq_len"] == 4096
    assert (spec["warmup_steps"], spec["timed_steps"], spec["balanced_routing"]) == (3, 8, True)
    assert "family" not in spec
    assert throughput.parse_args(["--config", "qwen3-30b-a3b-4l"]).frameworks.split(",")[-1] == "megatron-core"


def test_megatron_run_is_skipped_with_the_reason_where_megatron_core_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(throughput, "version", lambda dist: None if dist == "megatron-core" else "1")
    cfg = throughput.load_config("qwen3-30b-a3b-4l")
    mesh = throughput.mesh_of(cfg["meshes"][0])
    result = throughput.megatron_run(cfg, mesh, "natural", (1, 1), tmp_path, tmp_path / "log", 10)
    assert result["status"] == "skipped" and "pip install megatron-core==0.19.2" in result["error"]
    deepseek = throughput.load_config("deepseek-v2-lite-6l")
    result = throughput.megatron_run(deepseek, mesh, "natural", (1, 1), tmp_path, tmp_path / "log", 10)
    assert result["status"] == "skipped" and "qwen3_moe only" in result["error"]
