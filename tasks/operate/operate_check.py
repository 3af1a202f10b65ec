"""Pieces shared by the operate tasks' checkers (`tasks/operate/<slug>/check.py`).

A checker gathers one reason per failed condition and ends with `finish(failures)`: `PASS` and exit 0,
or one `FAIL: <reason>` line each and exit 1. Anything else (a traceback) is the harness's verdict ERROR,
so a checker reads the agent's files defensively and turns what it cannot read into a FAIL line.

Provided scripts log to `artifacts/<name>-<YYYYMMDD-HHMMSS>.log` and append `exit-time: <unix seconds>`
from one trap; `newest_log` takes the latest by its stamp (the agent may have run a script several times).
"""

import argparse
import atexit
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

OPERATE = Path(__file__).resolve().parent
LOG_NAME = re.compile(r"^(?P<name>[a-z0-9-]+)-(?P<stamp>\d{8}-\d{6})\.log$")
EXIT_TIME = re.compile(r"^exit-time: (\d+)\s*$", re.M)
# One training step's loss as each framework's trainer prints it.
STEP_LOSS = {
    "pithtrain": re.compile(r"^step (?P<step>\d+)/\d+ loss (?P<loss>\S+)", re.M),
    "torchtitan": re.compile(r"step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>\S+)", re.M),
    "megatron-lm": re.compile(r"iteration\s+(?P<step>\d+)/\s*\d+ \|.*?lm loss: (?P<loss>\S+)", re.M),
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# TorchTitan's provided model per profile: (flavor registered by the module of that name, its job config). The
# paper profile uses TorchTitan's own 16B flavor, which the checkers do not rebuild.
TORCHTITAN_PROVIDED = {"smoke": ("deepseek_v2_smoke", "smoke.toml"), "gpu1": ("deepseek_v2_lite_4l", "gpu1.toml")}
# Megatron-LM's pin (ate_bench.frameworks) as the harness keeps it (ate_bench.workspace: DEFAULT_CACHE_DIR / "git"):
# its git mirror, or a carried `git archive` of the commit (tasks/megatron_pin.sh). ATE_MEGATRON_SOURCE names another
# copy: a mirror or such an archive (tasks/operate/gpu1_golds.sh sets it to the one it carries).
MEGATRON_COMMIT = "3bec9aa"
MEGATRON_MIRROR = Path.home() / ".cache" / "pithtrain-ate" / "git" / "megatron-lm.git"
MEGATRON_CARRIED = MEGATRON_MIRROR.with_name(f"megatron-lm-{MEGATRON_COMMIT}.tar.xz")
PINNED: list[Path] = []  # where pinned_megatron put the pin, once a process


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--framework", required=True, choices=sorted(STEP_LOSS))
    p.add_argument("--answer", type=Path, required=True)
    p.add_argument("--profile", required=True)
    args = p.parse_args()
    args.workspace = args.workspace.resolve()
    return args


def provided(task_dir: Path, profile: str, framework: str, name: str) -> Path:
    """The pristine copy of a provided file (the task's, never the workspace's)."""
    return task_dir / "prepare" / profile / framework / name


def torchtitan_flavor(task_dir: Path, profile: str):
    """The provided TorchTitan flavor's model args (a copy) and its job config's [training] table; the flavor module
    is the task's own file, never the workspace's."""
    import dataclasses
    import importlib.util
    import tomllib

    from torchtitan.models.deepseek_v3 import deepseekv3_args

    flavor, config = TORCHTITAN_PROVIDED[profile]
    provided = task_dir / "prepare" / profile / "torchtitan"
    spec = importlib.util.spec_from_file_location(f"provided_{flavor}", provided / f"{flavor}.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))  # registers the flavor
    training = tomllib.loads((provided / config).read_text())["training"]
    args = dataclasses.replace(deepseekv3_args[flavor], max_seq_len=training["seq_len"])
    args.moe_impl = "standard"  # update_from_config sets it from parallelism.expert_parallel_comm_backend
    return args, training


def torchtitan_cpu_histc() -> None:
    """On a CPU build of torch, the smoke profile's stand-in's histc (torchtitan_cpu_standin/sitecustomize.py: int64
    counts, which TorchTitan's MoE router makes, have no CPU kernel); nothing where CUDA is available."""
    import importlib.util

    import torch

    if torch.cuda.is_available():
        return
    path = Path(__file__).resolve().parent / "torchtitan_cpu_standin" / "sitecustomize.py"
    spec = importlib.util.spec_from_file_location("torchtitan_cpu_standin", path)
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    standin.count_histc_in_float()


def megatron_source() -> Path | None:
    """Where the pin is: ATE_MEGATRON_SOURCE if set, else the harness's mirror, else its carried archive."""
    named = os.environ.get("ATE_MEGATRON_SOURCE")
    found = [Path(named)] if named else [p for p in (MEGATRON_MIRROR, MEGATRON_CARRIED) if p.exists()]
    return found[0] if found and found[0].exists() else None


def pinned_megatron() -> Path | str:
    """A directory whose `megatron/` is Megatron-LM's package at the pin, extracted from the harness's copy of it (never
    the workspace's), put first on sys.path and imported from there; or the one-line reason it cannot be had."""
    import io
    import tarfile

    if PINNED:
        return PINNED[0]
    source = megatron_source()
    if source is None:
        where = os.environ.get("ATE_MEGATRON_SOURCE") or f"{MEGATRON_MIRROR} nor {MEGATRON_CARRIED}"
        return f"checker: no Megatron-LM {MEGATRON_COMMIT} to read the run with: there is no {where}"
    if source.is_dir():  # a git mirror: its tree at the pin
        done = subprocess.run(["git", "-C", str(source), "archive", MEGATRON_COMMIT, "megatron"], capture_output=True)
        tar = tarfile.open(fileobj=io.BytesIO(done.stdout)) if done.returncode == 0 else None
    else:  # a `git archive` (plain, gz or xz): its pax header names the commit
        tar = tarfile.open(source)
    commit = tar.pax_headers.get("comment", "") if tar else ""
    if not commit.startswith(MEGATRON_COMMIT):
        return f"checker: {source} does not hold Megatron-LM at {MEGATRON_COMMIT} (it names '{commit}')"
    out = Path(tempfile.mkdtemp(prefix="pinned-megatron-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    tar.extractall(out, members=[m for m in tar if m.name.startswith("megatron/")], filter="data")
    sys.path.insert(0, str(out))
    import megatron

    if Path(megatron.__path__[0]).parent != out:  # imported before from elsewhere: not the pin
        return f"checker: megatron was imported from {megatron.__path__[0]} before the pinned copy"
    PINNED.append(out)
    return out


def megatron_dataset_helpers(root: Path) -> str | None:
    """Compile the pinned megatron's dataset helpers with its own Makefile (its C++ sample index), or the reason not.
    pybind11's headers come from the pybind11 package or else from the copy torch ships."""
    import torch

    try:
        import pybind11

        pybind = pybind11.get_include()
    except ImportError:
        pybind = str(Path(torch.__file__).parent / "include")
    flags = f"CPPFLAGS=-I{pybind} -I{sysconfig.get_paths()['include']}"
    suffix = f"LIBEXT={sysconfig.get_config_var('EXT_SUFFIX')}"
    done = subprocess.run(["make", "-C", str(root / "megatron/core/datasets"), flags, suffix], capture_output=True)
    if done.returncode:
        return f"checker: Megatron-LM's dataset helpers do not compile: {done.stderr.decode()[-300:]}"
    return None


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def newest_log(workspace: Path, name: str) -> Path | None:
    logs = [
        p
        for p in (workspace / "artifacts").glob(f"{name}-*.log")
        if (m := LOG_NAME.match(p.name)) and m["name"] == name
    ]
    return max(logs, key=lambda p: LOG_NAME.match(p.name)["stamp"]) if logs else None


def read_log(workspace: Path, name: str, failures: list[str]) -> str | None:
    """The newest `name` log's text, or None with the reason added to failures (no log, no exit-time)."""
    log = newest_log(workspace, name)
    if log is None:
        failures.append(f"no artifacts/{name}-<YYYYMMDD-HHMMSS>.log: {name}.sh did not run")
        return None
    text = ANSI.sub("", log.read_text(errors="replace"))
    if not EXIT_TIME.search(text):
        failures.append(f"{log.name} has no 'exit-time:' line: it was not written by the provided trap")
    return text


def step_losses(text: str, framework: str) -> dict[int, float]:
    """Step -> loss as printed by the framework's trainer (the last print of a step wins)."""
    out = {}
    for m in STEP_LOSS[framework].finditer(text):
        try:
            out[int(m["step"])] = float(m["loss"].rstrip("|,"))
        except ValueError:
            out[int(m["step"])] = math.nan
    return out


def check_steps(losses: dict[int, float], steps: int, where: str, failures: list[str]) -> None:
    """Steps 1..steps each printed with a finite loss."""
    missing = [s for s in range(1, steps + 1) if s not in losses]
    if missing:
        failures.append(f"{where} shows no loss for step(s) {missing} (expected steps 1 to {steps})")
    bad = {s: v for s, v in losses.items() if s <= steps and not math.isfinite(v)}
    if bad:
        failures.append(f"{where} has non-finite losses at {bad}")


def finish(failures: list[str]) -> int:
    for f in failures:
        print(f"FAIL: {f}")
    if not failures:
        print("PASS")
    return 1 if failures else 0
