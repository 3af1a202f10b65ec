"""The operate tasks' checker pieces on small synthetic inputs: each condition passes a right input, fails a wrong one.

The checkers end to end (gold PASS, noop and wrong cases FAIL) are proven by `python -m ate_bench validate`.
"""

import importlib.util
import json
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
