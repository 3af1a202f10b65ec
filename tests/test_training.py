"""The training loop: falling loss, exact resume, atomic checkpoints, accumulation, schedules."""

import json
import math
from pathlib import Path

import pytest
import torch

from pithtrain.modules import checkpoint as checkpoint_module
from pithtrain.modules.logging import ProgressLogger
from pithtrain.modules.training import TrainingCfg, lr_at
from pithtrain.tasks import pretrain_lm
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg


def run(config, *overrides):
    return [r["loss"] for r in pretrain_lm.launch(load_pretrain_cfg(config, list(overrides)))]


def test_tiny_model_learns(tiny_config):
    losses = run(tiny_config(max_steps=30), "training.lr=3e-2")
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < losses[0] - 0.7, losses


def test_resume_is_exact(tiny_config, tmp_path, monkeypatch):
    """10 steps in one run == 5 steps, a crash, 5 resumed steps: the same losses, bit for bit."""
    config = tiny_config(max_steps=10, extra="[checkpoint]\ninterval = 5\n")
    straight = run(config, f'run_dir="{tmp_path / "a"}"')

    real_log = ProgressLogger.log

    def crash_at_step_7(self, step, *args):
        if step == 7:  # after the step-5 checkpoint, with step 6 done and lost
            raise KeyboardInterrupt("killed")
        return real_log(self, step, *args)

    monkeypatch.setattr(ProgressLogger, "log", crash_at_step_7)
    with pytest.raises(pretrain_lm.TrainingStopped, match="interrupted"):
        run(config, f'run_dir="{tmp_path / "b"}"')
    monkeypatch.setattr(ProgressLogger, "log", real_log)
    resumed = run(config, f'run_dir="{tmp_path / "b"}"')
    assert resumed == straight[5:]
    metrics = [json.loads(line) for line in open(tmp_path / "b" / "metrics.jsonl")]
    # step 6 ran twice (before the crash and after the resume): the file holds it once, the resumed run's
    assert [m["step"] for m in metrics] == list(range(1, 11)) and [m["loss"] for m in metrics] == straight


def test_gradient_accumulation_matches_one_big_batch(tiny_config, tmp_path):
    # The load-balancing loss is defined per micro-batch, so it is off here: this checks the token loss.
    config = tiny_config(max_steps=3)
    accumulated = run(
        config, f'run_dir="{tmp_path / "a"}"', "training.micro_batch_size=1", 'model.aux_loss_type="none"'
    )
    whole = run(config, f'run_dir="{tmp_path / "b"}"', "training.micro_batch_size=4", 'model.aux_loss_type="none"')
    torch.testing.assert_close(torch.tensor(accumulated), torch.tensor(whole), rtol=1e-5, atol=0)


def test_interrupted_save_leaves_previous_checkpoint(tiny_config, tmp_path, monkeypatch):
    config = tiny_config(max_steps=2, extra="[checkpoint]\ninterval = 1\nkeep_last = 5\n")
    run(config)
    ckpt = tmp_path / "run" / "checkpoints"
    before = {p.name: p.stat().st_mtime_ns for p in ckpt.rglob("*")}
    assert (ckpt / "latest").read_text() == "step-00000002"

    real_save = checkpoint_module.dcp.save

    def crash_midway(state, checkpoint_id, process_group=None):
        real_save(state, checkpoint_id=checkpoint_id)  # data written, but the rename never happens
        raise KeyboardInterrupt("killed during save")

    monkeypatch.setattr(checkpoint_module.dcp, "save", crash_midway)
    with pytest.raises(pretrain_lm.TrainingStopped, match="interrupted"):
        run(config, "training.max_steps=3")
    assert (ckpt / "latest").read_text() == "step-00000002"
    assert not (ckpt / "step-00000003").exists()
    assert {p.name: p.stat().st_mtime_ns for p in ckpt.rglob("*") if ".tmp" not in str(p)} == before

    monkeypatch.setattr(checkpoint_module.dcp, "save", real_save)
    losses = run(config, "training.max_steps=3")  # resumes from step 2, cleans the leftover
    assert len(losses) == 1 and not list(ckpt.glob(".tmp-*"))


def snapshot(directory):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in directory.rglob("*") if p.is_file()}


@pytest.mark.parametrize("pointer", ["deleted", "stale"])
def test_newest_complete_checkpoint_is_resumed_never_overwritten(tiny_config, tmp_path, capsys, pointer):
    """A complete step-00000004 whose `latest` pointer is gone (deleted by hand) or still names step-00000002 (a
    crash between the rename and the pointer update): the run resumes from step 4, says so, and leaves it intact."""
    config = tiny_config(max_steps=4, extra="[checkpoint]\ninterval = 2\nkeep_last = 5\n")
    run(config)
    ckpt = tmp_path / "run" / "checkpoints"
    if pointer == "deleted":
        (ckpt / "latest").unlink()
    else:
        (ckpt / "latest").write_text("step-00000002")
    step4 = snapshot(ckpt / "step-00000004")
    capsys.readouterr()
    resumed = run(config, "training.max_steps=6")
    out = capsys.readouterr().out
    assert "step-00000004" in out.split("resumed from")[0] and "resumed from" in out, out
    assert snapshot(ckpt / "step-00000004") == step4
    assert len(resumed) == 2 and (ckpt / "latest").read_text() == "step-00000006"


def test_schedule_change_on_resume_is_reported(tiny_config, capsys):
    config = tiny_config(max_steps=4, extra="[checkpoint]\ninterval = 2\n")
    run(config)
    capsys.readouterr()
    run(config, "training.max_steps=6")
    out = capsys.readouterr().out
    new, old = lr_at(4, TrainingCfg(max_steps=6, lr=1e-2, min_lr=1e-3, warmup_steps=2)), 1e-3
    assert "(training.max_steps: 4 -> 6). Steps 1-4 ran under the old schedule" in out, out
    assert f"from step 5 the new one applies (its lr {new:.3e}, against {old:.3e} under the old)" in out, out
    capsys.readouterr()
    run(config, "training.max_steps=6")  # resumed at 6 = max_steps: the schedule is the saved one, nothing to say
    assert "schedule differs" not in capsys.readouterr().out


def test_keep_last_prunes_old_checkpoints(tiny_config, tmp_path):
    run(tiny_config(max_steps=4, extra="[checkpoint]\ninterval = 1\nkeep_last = 2\n"))
    names = sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("step-*"))
    assert names == ["step-00000003", "step-00000004"]


def test_init_from_loads_weights_only(tiny_config, tmp_path):
    config = tiny_config(max_steps=3)
    run(config, f'run_dir="{tmp_path / "a"}"')
    losses = run(config, f'run_dir="{tmp_path / "b"}"', f'checkpoint.init_from="{tmp_path / "a" / "checkpoints"}"')
    fresh = run(config, f'run_dir="{tmp_path / "c"}"')
    assert len(losses) == 3 and losses[0] < fresh[0]


def test_synthetic_data_runs(tiny_config, tmp_path):
    """Uniform random tokens: a freshly initialised model's loss is ln(vocab_size) to within its small logits, and
    the tokens depend only on the seed (two runs agree bit for bit)."""
    synthetic = ['data.kind="synthetic"', 'data.path=""']
    losses = run(tiny_config(max_steps=2), *synthetic)
    assert losses[0] == pytest.approx(math.log(2048), abs=0.02)
    assert run(tiny_config(max_steps=2), *synthetic, f'run_dir="{tmp_path / "again"}"') == losses


def test_schedules():
    cfg = TrainingCfg(max_steps=100, lr=1.0, min_lr=0.1, warmup_steps=10)
    assert lr_at(0, cfg) == pytest.approx(0.1) and lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(10, cfg) == pytest.approx(1.0) and lr_at(99, cfg) == pytest.approx(0.1, abs=1e-3)
    assert lr_at(55, cfg) == pytest.approx(0.55)  # halfway through the cosine: the mean of lr and min_lr
    wsd = TrainingCfg(max_steps=100, lr=1.0, min_lr=0.0, warmup_steps=10, lr_schedule="wsd", wsd_decay_fraction=0.2)
    assert lr_at(79, wsd) == 1.0 and lr_at(89, wsd) == pytest.approx(0.5) and lr_at(99, wsd) == pytest.approx(0.0)
    constant = TrainingCfg(max_steps=100, lr=1.0, min_lr=0.0, warmup_steps=0, lr_schedule="constant")
    assert lr_at(0, constant) == lr_at(99, constant) == 1.0


@pytest.mark.slow
def test_quick_start_example_trains(tmp_path):
    """The README's quick start: the tiny example on the shipped corpus, loss clearly falling."""
    repo = Path(__file__).resolve().parents[1]
    losses = run(repo / "examples" / "qwen3-moe-tiny.toml", f'run_dir="{tmp_path}"')
    assert sum(losses[-10:]) / 10 < losses[0] - 1.0
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step-00000120"
