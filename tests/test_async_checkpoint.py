"""Asynchronous checkpoints: training goes on while a save is written, and a kill -9 at any moment of that
background write leaves the previous checkpoint intact, from which the next run resumes bit-exactly."""

import os
import subprocess
import sys
import threading

import pytest
import torch
from conftest import REPO

from pithtrain.models import model_family
from pithtrain.modules import checkpoint as checkpoint_module
from pithtrain.modules.logging import ProgressLogger
from pithtrain.tasks import pretrain_lm
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg, make_model

CHECKPOINTS = "[checkpoint]\ninterval = 2\nkeep_last = 1\n"


def losses(config, *overrides):
    return [r["loss"] for r in pretrain_lm.launch(load_pretrain_cfg(config, list(overrides)))]


def test_training_goes_on_while_a_save_is_written(tiny_config, tmp_path, monkeypatch):
    """The write of step 2's checkpoint is held until step 3 has been logged: a save that stopped training for its
    write would never get there."""
    step_3_logged = threading.Event()
    real_write, real_log = checkpoint_module.write_checkpoint, ProgressLogger.log

    def held_write(ckpt_dir, step, *args):
        if step == 2:
            assert step_3_logged.wait(timeout=60), "training did not go on while the checkpoint was written"
        return real_write(ckpt_dir, step, *args)

    def log(self, step, *args):
        if step == 3:
            step_3_logged.set()
        return real_log(self, step, *args)

    monkeypatch.setattr(checkpoint_module, "write_checkpoint", held_write)
    monkeypatch.setattr(ProgressLogger, "log", log)
    config = tiny_config(max_steps=4, extra=CHECKPOINTS)
    assert len(losses(config)) == 4 and step_3_logged.is_set()
    ckpt = tmp_path / "run" / "checkpoints"
    assert (ckpt / "latest").read_text() == "step-00000004"
    assert checkpoint_module.verify_checkpoint(ckpt / "step-00000004")


# Each moment kills the process (SIGKILL, from the writing thread itself) during step 4's background write;
# keep_last = 1, so that write ends by deleting step 2.
CHILD = """
import os, shutil, signal, sys
from pathlib import Path
from pithtrain.__main__ import main
from pithtrain.modules import checkpoint

moment, config = sys.argv[1], sys.argv[2]

def kill():
    os.kill(os.getpid(), signal.SIGKILL)

if moment == "before-write":
    real_write = checkpoint.write_checkpoint
    def write_checkpoint(ckpt_dir, step, *args):
        if step == 4:
            kill()
        return real_write(ckpt_dir, step, *args)
    checkpoint.write_checkpoint = write_checkpoint
elif moment == "half-written":  # DCP's files written, the largest cut in half, as a write under way leaves it
    real_save = checkpoint.dcp.save
    def save(state, checkpoint_id, process_group=None):
        real_save(state, checkpoint_id=checkpoint_id, process_group=process_group)
        if "step-00000004" in checkpoint_id:
            largest = max(Path(checkpoint_id).iterdir(), key=lambda p: p.stat().st_size)
            os.truncate(largest, largest.stat().st_size // 2)
            kill()
    checkpoint.dcp.save = save
elif moment == "checksums":
    real_crc = checkpoint.file_crc32
    def file_crc32(path):
        if "step-00000004" in str(path):
            kill()
        return real_crc(path)
    checkpoint.file_crc32 = file_crc32
elif moment == "before-rename":  # meta.json written, the directory not yet renamed into place
    real_rename = os.rename
    def rename(src, dst, *args, **kwargs):
        if str(dst).endswith("step-00000004"):
            kill()
        return real_rename(src, dst, *args, **kwargs)
    checkpoint.os.rename = rename
elif moment == "before-pointer":  # step-00000004 complete, `latest` still naming step-00000002
    real_replace = os.replace
    def replace(src, dst, *args, **kwargs):
        if str(dst).endswith("latest") and Path(src).read_text() == "step-00000004":
            kill()
        return real_replace(src, dst, *args, **kwargs)
    checkpoint.os.replace = replace
elif moment == "pruning":  # step 2 half deleted
    real_rmtree = shutil.rmtree
    def rmtree(path, *args, **kwargs):
        if Path(path).name == "step-00000002":
            next(p for p in Path(path).iterdir() if p.suffix == ".distcp").unlink()
            kill()
        return real_rmtree(path, *args, **kwargs)
    checkpoint.shutil.rmtree = rmtree
sys.exit(main(["train", config]))
"""


def final_state(step_dir, config):
    model, _ = make_model(load_pretrain_cfg(config), model_family("qwen3_moe"), torch.device("cpu"))
    optimizer = pretrain_lm.make_optimizer(model, load_pretrain_cfg(config).training)
    checkpoint_module.load_checkpoint(step_dir, model, optimizer)
    return model.state_dict(), optimizer.state_dict()["state"]


# Three moments run in `make test` (a file cut short, everything written but not renamed, renamed but the pointer
# not moved); the other three, near those, only in `make test-all` (each costs a fresh process, ~15 s on 2 cores).
@pytest.mark.parametrize(
    "moment, newest",
    [
        pytest.param("before-write", 2, marks=pytest.mark.slow),
        ("half-written", 2),
        pytest.param("checksums", 2, marks=pytest.mark.slow),
        ("before-rename", 2),
        ("before-pointer", 4),
        pytest.param("pruning", 4, marks=pytest.mark.slow),
    ],
)
def test_kill_during_the_background_write_keeps_the_previous_checkpoint(tiny_config, tmp_path, moment, newest):
    config = tiny_config(max_steps=6, extra=CHECKPOINTS)
    straight = losses(config, f'run_dir="{tmp_path / "straight"}"')
    env = os.environ | {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, moment, str(config)], env=env, capture_output=True, timeout=300)
    assert out.returncode == -9, out.stderr.decode()[-2000:]
    ckpt = tmp_path / "run" / "checkpoints"
    assert checkpoint_module.latest_checkpoint(ckpt).name == f"step-{newest:08d}"
    assert checkpoint_module.verify_checkpoint(ckpt / f"step-{newest:08d}")  # every file as it was saved

    resumed = losses(config)  # the lock the killed run left is taken over
    assert resumed == straight[newest:]
    model_a, optim_a = final_state(tmp_path / "straight" / "checkpoints" / "step-00000006", config)
    model_b, optim_b = final_state(ckpt / "step-00000006", config)
    assert all(torch.equal(model_a[k], model_b[k]) for k in model_a)
    assert all(torch.equal(optim_a[i][k], optim_b[i][k]) for i in optim_a for k in optim_a[i])
    assert not list(ckpt.glob(".tmp-*")) and sorted(p.name for p in ckpt.glob("step-*")) == ["step-00000006"]
