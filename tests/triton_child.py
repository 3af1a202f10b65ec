"""Kernel tests on CPU: triton fixes compiled-or-interpreted when `triton.language` is first imported, and pytest
imports every test module (so the model, so the operators) before running any. A process that did not start
with TRITON_INTERPRET=1 therefore runs a file's `device` cases in a child pytest that did."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
DEVICES = ["cpu"] if INTERPRETED else ["cuda"] if torch.cuda.is_available() else []
IN_CHILD = "kernels run in the TRITON_INTERPRET=1 child process (test_cpu_cases_under_interpreter)"


def parametrize_device(metafunc) -> None:
    """For a module's `pytest_generate_tests`: "cuda" where there is a GPU, "cpu" in the interpreter child."""
    if "device" in metafunc.fixturenames:
        skipped = pytest.param("cpu", marks=pytest.mark.skip(reason=IN_CHILD))
        metafunc.parametrize("device", DEVICES or [skipped])


def run_under_interpreter(test_file: str) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file]
    out = subprocess.run(cmd, env=env, cwd=Path(__file__).parents[1], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and " passed" in out.stdout, out.stdout[-6000:] + out.stderr[-3000:]
