"""What no fault may cost a run: a step that is not finite is never applied nor saved (exit 3); a busy run_dir is
refused; an unusable checkpoint.dir is found before the first step; Ctrl-C and a full disk stop with one line and
keep the previous checkpoint, from which the resume is exact."""

import os
import shutil
import signal
import subprocess
import sys
from collections import namedtuple

import pytest
import torch
from conftest import REPO

from pithtrain.__main__ import main
from pithtrain.models import model_family
from pithtrain.modules import checkpoint as checkpoint_module
from pithtrain.tasks import pretrain_lm
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg, make_model


def run_cli(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def losses(config, *overrides):
    return [r["loss"] for r in pretrain_lm.launch(load_pretrain_cfg(config, list(overrides)))]


def test_non_finite_step_is_neither_applied_nor_saved(tiny_config, tmp_path, capsys):
    """At lr 1e9 step 2's gradient norm is NaN: the run stops there with exit 3, naming the step, what was not
    finite and the last good checkpoint; with keep_last = 1 that checkpoint (step 1, finite weights) survives."""
    config = tiny_config(max_steps=4, extra="[checkpoint]\ninterval = 1\nkeep_last = 1\n")
    code, _, err = run_cli(["train", config, "--set", "training.lr=1e9", "--set", "training.min_lr=0"], capsys)
    ckpt = tmp_path / "run" / "checkpoints"
    assert code == 3 and err.count("\n") == 1 and "step 2 is not finite (gradient norm nan" in err, err
    assert f"Last good checkpoint: '{ckpt / 'step-00000001'}'" in err and "training.lr" in err, err
    assert (ckpt / "latest").read_text() == "step-00000001"
    assert sorted(p.name for p in ckpt.glob("step-*")) == ["step-00000001"]
    model, _ = make_model(load_pretrain_cfg(config), model_family("qwen3_moe"), torch.device("cpu"))
    checkpoint_module.load_checkpoint(ckpt / "step-00000001", model)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def hold_lock(path):
    """A process (not this one) that holds `path` as a running trainer does, until killed."""
    code = f"import fcntl, os, time; fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT); "
    code += "fcntl.lockf(fd, fcntl.LOCK_EX); os.write(fd, str(os.getpid()).encode()); print('held', flush=True); "
    code += "time.sleep(120)"
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_busy_run_dir_is_refused_naming_the_holder(tiny_config, tmp_path, capsys):
    config = tiny_config(max_steps=2)
    (tmp_path / "run").mkdir()
    holder = hold_lock(tmp_path / "run" / "run.lock")
    try:
        code, _, err = run_cli(["train", config], capsys)
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and f"is in use by another run (PID {holder.pid}" in err, err
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["run.lock"]


def test_stale_run_dir_lock_is_taken_over(tiny_config, tmp_path, capsys):
    """A lock file left by a run killed with -9 (its PID dead, its lock gone with it)."""
    config = tiny_config(max_steps=2)
    (tmp_path / "run").mkdir()
    holder = hold_lock(tmp_path / "run" / "run.lock")
    holder.kill()
    holder.wait()
    code, out, _ = run_cli(["train", config], capsys)
    assert code == 0 and f"was left by PID {holder.pid}, which is not running; taking it over" in out, out
    assert not (tmp_path / "run" / "run.lock").exists()


def test_a_second_setup_in_the_holding_process_is_not_refused(tiny_config):
    """A script that builds a run twice in one process (as the estimate-memory skill does) is not a second run."""
    config = load_pretrain_cfg(tiny_config(max_steps=2))
    first, second = pretrain_lm.setup(config), pretrain_lm.setup(config)
    second.lock.release()
    first.lock.release()


@pytest.mark.parametrize("where", ["file", "unwritable"])
def test_unusable_run_dir(tiny_config, tmp_path, capsys, where):
    config = tiny_config(max_steps=2)
    if where == "file":
        (tmp_path / "run").write_text("not a directory")
        code, _, err = run_cli(["train", config], capsys)
        assert code == 2 and f"run_dir '{tmp_path / 'run'}' is an existing file" in err, err
    else:
        code, _, err = run_cli(["train", config, "--set", 'run_dir="/proc/pithtrain-run"'], capsys)
        assert code == 2 and "run_dir '/proc/pithtrain-run' is not writable" in err, err


@pytest.mark.parametrize("where", ["file", "unwritable", "full"])
def test_unusable_checkpoint_dir_is_found_before_the_first_step(tiny_config, tmp_path, capsys, monkeypatch, where):
    config = tiny_config(max_steps=2)
    ckpt = tmp_path / "ckpt"
    if where == "file":
        ckpt.write_text("")
        message = f"checkpoint.dir '{ckpt}' is an existing file"
    elif where == "unwritable":
        ckpt = "/proc/pithtrain-checkpoints"  # unwritable even by root
        message = f"checkpoint.dir '{ckpt}' is not writable"
    else:
        usage = namedtuple("usage", "total used free")
        monkeypatch.setattr(checkpoint_module.shutil, "disk_usage", lambda path: usage(10**6, 10**6 - 4096, 4096))
        message = "GiB free, but one checkpoint takes about 0.00"
    code, _, err = run_cli(["train", config, "--set", f'checkpoint.dir="{ckpt}"'], capsys)
    assert code == 2 and message in err, err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # refused before the first step


def test_disk_full_during_a_save(tiny_config, tmp_path, capsys, monkeypatch):
    """A save that fails as torch's writer fails when the disk fills ("unexpected pos", a short write): one line
    about space, exit 2, the partial directory gone and the previous checkpoint intact."""
    config = tiny_config(max_steps=2, extra="[checkpoint]\ninterval = 1\nkeep_last = 1\n")
    real_save, real_usage = checkpoint_module.dcp.save, shutil.disk_usage
    full = {"now": False}

    def save_until_full(state, checkpoint_id, process_group=None):
        if "step-00000002" not in checkpoint_id:
            return real_save(state, checkpoint_id=checkpoint_id, process_group=process_group)
        os.makedirs(checkpoint_id, exist_ok=True)
        open(os.path.join(checkpoint_id, "__0_0.distcp"), "wb").write(b"\0" * 4096)
        full["now"] = True
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 4096 vs 3994")

    def usage(path):
        real = real_usage(path)
        return real._replace(free=0) if full["now"] else real

    monkeypatch.setattr(checkpoint_module.dcp, "save", save_until_full)
    monkeypatch.setattr(checkpoint_module.shutil, "disk_usage", usage)
    code, _, err = run_cli(["train", config], capsys)
    ckpt = tmp_path / "run" / "checkpoints"
    assert code == 2 and err.count("\n") == 1 and "no space left on the device of checkpoint.dir" in err, err
    assert "while saving step 2" in err and "previous checkpoint is intact" in err, err
    assert not list(ckpt.glob(".tmp-*")) and (ckpt / "latest").read_text() == "step-00000001"
    assert checkpoint_module.verify_checkpoint(ckpt / "step-00000001")


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux) for a private tmpfs")
def test_real_disk_full_during_a_save(tiny_config, tmp_path):
    """The same on a real full disk: checkpoint.dir on a 3 MiB tmpfs (in a private mount namespace), which holds
    one checkpoint of the tiny model (1.8 MiB) but not the second, written before the first is pruned."""
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode:
        pytest.skip(f"unshare -rm is not permitted here: {probe.stderr.decode().strip()}")
    config = tiny_config(max_steps=3, extra="[checkpoint]\ninterval = 1\nkeep_last = 1\n")
    (tmp_path / "mnt").mkdir()
    script = (
        f"mount -t tmpfs -o size=3m tmpfs {tmp_path / 'mnt'} && {sys.executable} -m pithtrain train {config} "
        f"--set 'checkpoint.dir=\"{tmp_path / 'mnt'}\"'; code=$?; cat {tmp_path / 'mnt' / 'latest'}; exit $code"
    )
    env = os.environ | {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 2 and "no space left on the device" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and out.stdout.endswith("step-00000001"), out.stdout


CHILD = """
import os, signal, sys
from pithtrain.__main__ import main
from pithtrain.modules import checkpoint
from pithtrain.tasks import pretrain_lm

moment = sys.argv[1]

def interrupt():
    os.kill(os.getpid(), signal.SIGINT)

if moment == "step":  # inside step 4's forward/backward
    real_fb = pretrain_lm.forward_backward
    def forward_backward(run, consumed):
        if consumed == 3 * run.cfg.training.global_batch_size:
            interrupt()
        return real_fb(run, consumed)
    pretrain_lm.forward_backward = forward_backward
elif moment == "staging":  # while step 4's state is copied for its save
    real_copy = checkpoint._copy_state_dict
    def copy(state, buffers, **kwargs):
        if copy.calls == 1:
            interrupt()
        copy.calls += 1
        return real_copy(state, buffers, **kwargs)
    copy.calls = 0
    checkpoint._copy_state_dict = copy
elif moment == "write":  # while step 4's checkpoint is written in the background
    real_crc = checkpoint.file_crc32
    def crc(path):
        if "step-00000004" in str(path) and not crc.done:
            crc.done = True
            interrupt()
        return real_crc(path)
    crc.done = False
    checkpoint.file_crc32 = crc
sys.exit(main(["train", sys.argv[2]]))
"""


def sigint_as_at_a_terminal():
    """A test run started in the background (`make test &`) hands its children SIGINT ignored, and Python then installs
    no KeyboardInterrupt; a Ctrl-C at a terminal reaches a process whose SIGINT is at its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("moment", ["step", "staging", "write"])
def test_ctrl_c_stops_with_one_line_and_resumes_exactly(tiny_config, tmp_path, moment):
    config = tiny_config(max_steps=6, extra="[checkpoint]\ninterval = 2\n")
    straight = losses(config, f'run_dir="{tmp_path / "straight"}"')
    env = os.environ | {"PYTHONPATH": str(REPO)}  # this process's thread count: the losses compared must match bits
    out = subprocess.run(
        [sys.executable, "-c", CHILD, moment, str(config)], capture_output=True, text=True, env=env, timeout=300,
        preexec_fn=sigint_as_at_a_terminal,
    )  # fmt: skip
    ckpt = tmp_path / "run" / "checkpoints"
    # the write was under way when Ctrl-C came: it is finished, not abandoned; earlier, step 2 is the newest
    newest = "step-00000004" if moment == "write" else "step-00000002"
    assert out.returncode == 130 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("stopped: interrupted (Ctrl-C)") and f"{ckpt / newest}'" in out.stderr, out.stderr
    assert (ckpt / "latest").read_text() == newest and checkpoint_module.verify_checkpoint(ckpt / newest)
    assert not (tmp_path / "run" / "run.lock").exists()
    resumed = losses(config)
    assert resumed == straight[int(newest[-1]) :]


def test_ctrl_c_in_tokenize_is_one_line(tmp_path, monkeypatch, capsys):
    from pithtrain.tasks import tokenize_corpus

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(tokenize_corpus, "load_tokenizer", interrupted)
    (tmp_path / "a.txt").write_text("hello")
    argv = ["tokenize", tmp_path / "a.txt", "--tokenizer", tmp_path, "--output", tmp_path / "o"]
    code, _, err = run_cli(argv, capsys)
    assert code == 128 + signal.SIGINT, code
    assert err == "interrupted (Ctrl-C): `pithtrain tokenize` stopped before it finished.\n"
