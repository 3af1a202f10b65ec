"""Logging: metrics.jsonl and the progress lines, TensorBoard and Weights & Biases only when asked (optional packages,
a clear exit 2 where missing), and `pithtrain plot`."""

import json
import sys
import types

import pytest

from pithtrain.__main__ import main
from pithtrain.tasks import pretrain_lm
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg


def train(config, *overrides):
    return pretrain_lm.launch(load_pretrain_cfg(config, list(overrides)))


def test_first_progress_line_and_summary(tiny_config, tmp_path, capsys):
    records = train(tiny_config(max_steps=3), "logging.log_interval=10")
    lines = capsys.readouterr().out.splitlines()
    metrics = tmp_path / "run" / "metrics.jsonl"
    steps = [line for line in lines if line.startswith("step ")]
    assert steps[0].startswith("step 1/3") and steps[0].endswith(f"(every step's metrics: {metrics})")
    assert [s.split()[1] for s in steps] == ["1/3", "3/3"]  # the first line, then log_interval or the end
    summary = lines[-1]
    assert summary.startswith("done: 3 steps (to step 3), 384 tokens in ")  # 3 x 4 sequences x 32 tokens
    assert f"final loss {records[-1]['loss']:.4f}; " in summary
    assert summary.endswith(f"checkpoint {tmp_path / 'run' / 'checkpoints' / 'step-00000003'}; metrics {metrics}")


def test_tensorboard_holds_the_metrics_scalars(tiny_config, tmp_path):
    pytest.importorskip("tensorboard", reason="logging.tensorboard needs the optional tensorboard package")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    records = train(tiny_config(max_steps=3), "logging.tensorboard=true")
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(records[0]) - {"step"}
    for key in ("loss", "lr", "tokens_per_s"):
        logged = [(e.step, e.value) for e in events.Scalars(key)]
        assert logged == [(r["step"], pytest.approx(r[key], rel=1e-6)) for r in records], key


def test_wandb_only_when_asked(tiny_config, tmp_path, monkeypatch):
    calls = []
    run = types.SimpleNamespace(log=lambda data, step: calls.append(("log", step, data["loss"])),
                                finish=lambda: calls.append(("finish",)))  # fmt: skip
    fake = types.SimpleNamespace(init=lambda **kw: calls.append(("init", kw["project"], kw["dir"])) or run)
    monkeypatch.setitem(sys.modules, "wandb", fake)  # installed, but not asked for: never started
    train(tiny_config(max_steps=2), f'run_dir="{tmp_path / "off"}"')
    assert calls == []
    records = train(tiny_config(max_steps=2), 'logging.wandb_project="pt"')
    assert calls == [("init", "pt", str(tmp_path / "run"))] + [("log", r["step"], r["loss"]) for r in records] + [
        ("finish",)
    ]


@pytest.mark.parametrize("key, module, package", [("tensorboard=true", "torch.utils.tensorboard", "tensorboard"),
                                                  ('wandb_project="p"', "wandb", "wandb")])  # fmt: skip
def test_missing_logging_package_is_named(tiny_config, tmp_path, capsys, monkeypatch, key, module, package):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    code = main(["train", str(tiny_config(max_steps=2)), "--set", f"logging.{key}"])
    err = capsys.readouterr().err
    assert code == 2 and f"the '{package}' package is not installed: pip install {package}" in err, err
    assert not (tmp_path / "run").exists()


def write_run(path, losses):
    path.mkdir()
    rows = [{"step": i + 1, "loss": v, "lr": 1e-3, "tokens_per_s": 100.0 + i, "peak_mem_gib": 1.0}
            for i, v in enumerate(losses)]  # fmt: skip
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_plot_overlays_runs(tmp_path, capsys):
    pytest.importorskip("seaborn", reason="`pithtrain plot` needs the optional seaborn package")
    write_run(tmp_path / "a", [3.0, 2.5, 2.0])
    write_run(tmp_path / "b", [3.1, 2.9])
    assert main(["plot", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    png = (tmp_path / "a" / "metrics.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert main(["plot", str(tmp_path / "b"), "--output", str(tmp_path / "x.png")]) == 0
    assert (tmp_path / "x.png").is_file() and "wrote" in capsys.readouterr().out
    assert main(["plot", str(tmp_path)]) == 2 and "has no metrics.jsonl" in capsys.readouterr().err


def test_plot_without_seaborn(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "seaborn", None)
    write_run(tmp_path / "a", [3.0])
    assert main(["plot", str(tmp_path / "a")]) == 2
    assert "pip install seaborn" in capsys.readouterr().err
    assert not (tmp_path / "a" / "metrics.png").exists()
