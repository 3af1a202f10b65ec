"""benchmarks/throughput.py: the CPU smoke run end to end (pithtrain's trainer fed in memory, metrics.jsonl, the
JSONL record), and the pieces the GPU runs rely on that can be checked without a GPU: the configurations, the step
minimums, the run order, the per-step reader, TorchTitan's job and flavor module, and TorchTitan's driver
(benchmarks/torchtitan_run.py: in-memory loader, step recorder; the loader only where torchtitan imports: its
Trainer needs CUDA, so it is never run here)."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

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
    "peak_measured_per_gpu_tflops", "input_pipeline", "run_order_seed", "step_time_window", "command",
}  # fmt: skip


def test_profile_step_smoke(tmp_path):
    """benchmarks/profile_step.py runs the trainer's step under the profiler and writes its report (CPU)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, str(SCRIPT.parent / "profile_step.py"), "--smoke", "--steps", "1,1", "--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    (report,) = tmp_path.glob("profile-smoke-tiny-pp1-ep1-eager.txt")
    assert "step wall time" in report.read_text()


def test_checkpoint_stall_smoke(tmp_path):
    """benchmarks/checkpoint_stall.py (the GPU measurement of a save's stall, sync against async) runs on CPU."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, str(SCRIPT.parent / "checkpoint_stall.py"), "--smoke", "--steps", "2"]
    cmd += ["--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    record = json.loads((tmp_path / "checkpoint_stall.json").read_text())
    assert record["sync_save_s"] > 0 and len(record["async_saves"]) == 3
    assert all(s["path"].endswith(f"step-{10 * (i + 1):08d}") for i, s in enumerate(record["async_saves"]))


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
    assert rec["input_pipeline"] == "synthetic-in-memory" and rec["peak_mem_kind"] == "process peak RSS"
    assert len(rec["step_times_s"]) == rec["timed_steps"] == 2 and rec["warmup_steps"] == 1
    tokens_per_gpu = rec["global_batch_size"] * rec["seq_len"]
    median = sorted(tokens_per_gpu / t for t in rec["step_times_s"])
    assert math.isclose(rec["tokens_per_s_per_gpu"], sum(median) / 2, rel_tol=1e-3)
    assert rec["mfu_spec"] is None and rec["peak_spec_tflops"] is None  # no MFU on a CPU
    assert len(rec["losses"]) == 3 and all(math.isfinite(x) for x in rec["losses"])
    assert (tmp_path / f"logs-{rec['call_id']}" / rec["log"]).is_file()
    assert rec["command"] == "python benchmarks/throughput.py --smoke"  # what it measures, not where it wrote
    assert throughput.user_command(["--config", "c", "--out", "/x", "--deadline=9", "--logs", "/y", "--gpus", "1"]) == (
        "python benchmarks/throughput.py --config c --gpus 1"
    )
    assert "-CPU-" in rec["log"] and "1GPU" not in res.stdout  # a CPU smoke run is not labelled as a GPU run
    assert "pithtrain" in res.stdout.splitlines()[-1]  # the summary table comes last


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a host without a CUDA GPU")
def test_a_gpu_call_on_a_cpu_host_exits_2_in_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, str(SCRIPT), "--config", "qwen3-30b-a3b-4l", "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "sees no CUDA GPU" in line and "--smoke" in line and not out.exists()


def test_a_python_without_torch_gets_one_line_not_a_traceback(tmp_path):
    """nox -s throughput runs in the calling Python; the system one may lack torch."""
    env = {"PATH": os.environ["PATH"], "PYTHONNOUSERSITE": "1"}
    cmd = [sys.executable, "-S", str(SCRIPT), "--config", "qwen3-30b-a3b-4l", "--out", str(tmp_path / "out")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "torch is not importable" in res.stderr and "Traceback" not in res.stderr


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


def test_each_block_runs_every_framework_once_in_a_seeded_random_order():
    meshes, fws = [{"gpus": 1}, {"gpus": 2}], ["a", "b", "c", "d"]

    def blocks(seed, repeats=2, routings=("natural", "balanced")):
        runs = [(m["gpus"], f, r) for m, f, r in throughput.plan(meshes, fws, list(routings), repeats, seed)]
        return [runs[i : i + len(fws)] for i in range(0, len(runs), len(fws))]

    for block in blocks(7):
        assert sorted(f for _, f, _ in block) == fws and len({(g, r) for g, _, r in block}) == 1
    assert [(g, r) for g, _, r in (b[0] for b in blocks(7))] == [(1, "natural"), (1, "balanced")] * 2 + [
        (2, "natural"), (2, "balanced")] * 2  # fmt: skip
    assert blocks(7) == blocks(7)
    # With one repeat and one routing the order still changes between calls: no side is always first.
    firsts = {blocks(seed, 1, ["natural"])[0][0][1] for seed in range(20)}
    assert firsts == set(fws)


def test_gpu_runs_need_ten_warmup_and_twenty_timed_steps():
    args = throughput.parse_args(["--config", "qwen3-30b-a3b-8l", "--steps", "3,8"])
    with pytest.raises(SystemExit, match="at least 10 and 20"):
        throughput.select(args)
    cfg, _, steps, meshes, _ = throughput.select(throughput.parse_args(["--config", "qwen3-30b-a3b-8l"]))
    assert steps == (10, 20) and [m["gpus"] for m in meshes] == [1, 2]
    assert cfg["model"]["num_hidden_layers"] == 8


def test_read_steps_keeps_the_timed_steps_and_the_runs_peak(tmp_path):
    metrics = tmp_path / "m.jsonl"
    lines = [{"step": i, "step_time_s": 0.1 * i, "loss": 10 - i, "mem": 5.0 + (i == 2)} for i in range(1, 7)]
    metrics.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"step": 7, "step_ti')  # a line cut mid-write
    out = throughput.read_steps("ok", "", metrics, (2, 3), "mem", "kind")
    assert out["step_times_s"] == [0.1 * 3, 0.1 * 4, 0.1 * 5] and out["losses"] == [9, 8, 7, 6, 5]
    assert out["peak_mem_gib"] == 6.0 and out["peak_mem_kind"] == "kind"
    assert throughput.read_steps("failed", "why", metrics, (2, 3), "mem", "kind") == {
        "status": "failed",
        "error": "why",
    }


def test_summary_gives_the_ratios_of_each_mesh_and_routing():
    def rec(label, fw, variant, tps, routing="natural"):
        return {"label": label, "framework": fw, "variant": variant, "tokens_per_s_per_gpu": tps, "gpus": 1,
                "mesh": {"pp": 1, "dp": 1, "cp": 1, "ep": 1}, "routing": routing, "mfu_spec": None,
                "mfu_measured_peak": None, "peak_mem_gib": None, "peak_mem_nvidia_smi_gib": None, "status": "ok",
                "error": "", "smoke": False}  # fmt: skip

    records = [
        rec("pithtrain", "pithtrain", "eager", 80.0), rec("pithtrain-compiled", "pithtrain", "compiled", 100.0),
        rec("pithtrain-fp8", "pithtrain", "fp8", 90.0), rec("torchtitan-compiled", "torchtitan", "compiled", 80.0),
        rec("megatron-core", "megatron-core + torch kernels", "eager", 50.0),
        rec("torchtitan-compiled", "torchtitan", "compiled", None, "balanced"),
    ]  # fmt: skip
    last = throughput.summary(records).splitlines()[-1]
    assert last.startswith("ratios 1GPU natural: BF16/TorchTitan 1.250, BF16/megatron-core 2.000, FP8/BF16 0.900")


def test_torchtitan_job_is_fed_by_the_driver_not_a_dataset(tmp_path):
    cfg = throughput.load_config("qwen3-30b-a3b-8l")
    mesh = throughput.mesh_of(cfg["meshes"][1])
    job = throughput.torchtitan_job(cfg, mesh, "balanced", 30, True, "qwen3", tmp_path)
    assert job["model"] == {"name": "qwen3", "flavor": throughput.TT_FLAVOR}  # no tokenizer assets
    assert not {"dataset", "dataset_path"} & job["training"].keys() and job["training"]["steps"] == 30
    assert job["metrics"]["log_freq"] == 1 and job["debug"]["moe_force_load_balance"] is True
    assert job["training"]["local_batch_size"] == 4 and job["parallelism"]["expert_parallel_degree"] == 2


def load_driver(name):
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location(name, SCRIPT.parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_torchtitan_step_recorder_times_from_one_line_to_the_next(tmp_path, monkeypatch):
    driver = load_driver("torchtitan_run")
    clock = iter([10.0, 10.5, 11.25])
    monkeypatch.setattr(driver.time, "perf_counter", lambda: next(clock))
    rec = driver.StepRecorder(str(tmp_path / "m.jsonl"), torch.device("cpu"))
    rec.record(1, 12.5)
    rec.record(2, 12.0)
    lines = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [(x["step"], x["step_time_s"], x["loss"]) for x in lines] == [(1, 0.5, 12.5), (2, 0.75, 12.0)]


def test_torchtitan_in_memory_spec_has_no_tokenizer_and_yields_each_steps_ids():
    pytest.importorskip("torchtitan", reason="torchtitan 0.2.2 is not installed here (the GPU machine has it)")
    from types import SimpleNamespace

    from torchtitan.protocols.train_spec import get_train_spec

    driver = load_driver("torchtitan_run")
    name = driver.register_in_memory_spec("qwen3")
    spec, base = get_train_spec(name), get_train_spec("qwen3")
    assert spec.build_tokenizer_fn is None and spec.model_cls is base.model_cls and spec.model_args is base.model_args
    flavor = next(iter(spec.model_args))
    job = SimpleNamespace(
        training=SimpleNamespace(local_batch_size=2, seq_len=16, steps=3),
        model=SimpleNamespace(flavor=flavor),
        debug=SimpleNamespace(seed=5),
    )
    loaders = [spec.build_dataloader_fn(dp_world_size=2, dp_rank=r, tokenizer=None, job_config=job) for r in (0, 1)]
    batches = [list(loader) for loader in loaders]
    assert len(batches[0]) == 3
    (inputs, labels), vocab = batches[0][0], spec.model_args[flavor].vocab_size
    assert inputs.keys() == {"input"} and inputs["input"].shape == labels.shape == (2, 16)
    assert torch.equal(inputs["input"][:, 1:], labels[:, :-1]) and int(labels.max()) < vocab
    assert not torch.equal(batches[0][0][1], batches[1][0][1])  # each data-parallel rank its own ids


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


def test_torchtitan_driver_hands_the_job_to_torchtitans_own_config_parser(tmp_path):
    """In a fresh interpreter, as torchrun starts it: TorchTitan's ConfigManager reads the job throughput.py wrote,
    with model.name switched to the in-memory spec (its parse_args binds sys.argv at import)."""
    pytest.importorskip("torchtitan", reason="torchtitan 0.2.2 is not installed here (the GPU machine has it)")
    cfg = throughput.load_config("qwen3-30b-a3b-4l")
    mesh = throughput.mesh_of(cfg["meshes"][0])
    throughput.torchtitan_flavor_module(cfg, tmp_path)
    (tmp_path / "job.toml").write_text(
        throughput.to_toml(throughput.torchtitan_job(cfg, mesh, "natural", 30, True, "qwen3", tmp_path))
    )
    child = f"""
import sys
sys.path[:0] = [{str(SCRIPT.parent)!r}, {str(tmp_path)!r}]
import torchtitan_run
job_file = {str(tmp_path / "job.toml")!r}
torchtitan_run.prepare(["--base-model", "qwen3", "--metrics", "m.jsonl", "--job.config_file", job_file])
from torchtitan.config import ConfigManager
from torchtitan.protocols.train_spec import get_train_spec
job = ConfigManager().parse_args()
import pithbench_flavor
spec = get_train_spec(job.model.name)
print(job.model.name, job.model.flavor, job.training.steps, job.compile.enable, spec.build_tokenizer_fn,
      spec.model_args[job.model.flavor].n_layers)
"""
    res = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split()[-6:] == ["pithbench_qwen3", throughput.TT_FLAVOR, "30", "True", "None", "4"]


def test_a_failed_run_names_its_out_of_memory_error(tmp_path):
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried 9 GiB"
    script = f"print({oom!r}); [print('noise', i) for i in range(20)]; exit(1)"
    cmd = [sys.executable, "-c", script]
    status, detail = throughput.run_until(cmd, os.environ, tmp_path, tmp_path / "log", lambda: 0, 3, 60)
    assert status == "failed" and detail.endswith(oom)
    cmd = [sys.executable, "-c", "[print('noise', i) for i in range(20)]; exit(1)"]
    status, detail = throughput.run_until(cmd, os.environ, tmp_path, tmp_path / "log", lambda: 0, 3, 60)
    assert status == "failed" and "noise 19" in detail and "noise 4" not in detail


def test_per_layer_splits_the_step_into_layers_and_the_rest(tmp_path):
    """Two depths of one shape give the time per layer and the rest; a third shape run at one depth, a failed run
    and another mesh do not mix in."""
    per_layer_spec = importlib.util.spec_from_file_location("per_layer", REPO / "benchmarks" / "per_layer.py")
    per_layer = importlib.util.module_from_spec(per_layer_spec)
    per_layer_spec.loader.exec_module(per_layer)

    def rec(label, layers, step_s, status="ok", hidden=2048, mesh=None):
        model = {"family": "qwen3_moe", "hidden_size": hidden, "num_hidden_layers": layers}
        return {"label": label, "status": status, "step_times_s": [step_s, step_s + 0.002, step_s - 0.002],
                "config_table": {"model": model}, "seq_len": 4096, "global_batch_size": 4, "micro_batch_size": 4,
                "mesh": mesh or {"gpus": 1}, "routing": "natural"}  # fmt: skip

    records = [
        rec("pithtrain", 4, 0.150), rec("pithtrain", 8, 0.240),  # 22.5 ms a layer, 60 ms the rest
        rec("torchtitan-compiled", 4, 0.210), rec("torchtitan-compiled", 8, 0.360),  # 37.5 and 60
        rec("pithtrain", 3, 0.5, hidden=4096), rec("pithtrain", 8, 9.9, status="failed"),
        rec("pithtrain", 4, 0.3, mesh={"gpus": 2, "ep": 2}),
    ]  # fmt: skip
    path = tmp_path / "call.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    rows = per_layer.per_layer_rows(per_layer.load_records([tmp_path]))
    assert [(r["label"], r["depths"]) for r in rows] == [("pithtrain", (4, 8)), ("torchtitan-compiled", (4, 8))]
    assert rows[0]["per_layer_ms"] == pytest.approx(22.5) and rows[0]["rest_ms"] == pytest.approx(60.0)
    assert rows[1]["per_layer_ms"] == pytest.approx(37.5) and rows[1]["rest_ms"] == pytest.approx(60.0)
    assert "per-layer TorchTitan/pithtrain 1.67x" in per_layer.report(rows)
    assert per_layer.main([str(tmp_path / "missing")]) == 2
