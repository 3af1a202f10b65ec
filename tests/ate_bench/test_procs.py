"""The time limit kills the agent's whole process tree, including processes that left its group."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ate_bench.procs import is_alive, run_process_tree

# A fake agent: a background child, a grandchild, and one that escapes the process group with setsid.
# Each writes its pid to a file, then everything sleeps far past the limit.
AGENT = """
sleep 300 & echo $! > child.pid
bash -c 'sleep 300 & echo $! > grandchild.pid; wait' &
setsid sleep 300 & echo $! > escaped.pid
echo started
sleep 300
"""


def test_timeout_kills_the_whole_tree(tmp_path):
    lines = []
    t0 = time.monotonic()
    result = run_process_tree(
        ["bash", "-c", AGENT],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        time_limit_s=1.5,
        on_line=lambda t, line: lines.append((t, line)),
        stderr_path=tmp_path / "stderr",
    )
    assert result.timed_out
    assert time.monotonic() - t0 < 15
    assert [line for _, line in lines] == ["started"]
    assert lines[0][0] >= result.start  # stamped on arrival
    pids = [int((tmp_path / f"{name}.pid").read_text()) for name in ("child", "grandchild", "escaped")]
    deadline = time.monotonic() + 5
    while any(is_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if is_alive(p)]


def test_clean_exit_is_not_a_timeout(tmp_path):
    result = run_process_tree(
        ["bash", "-c", "echo one; echo two; exit 3"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        time_limit_s=30,
        on_line=lambda t, line: None,
        stderr_path=tmp_path / "stderr",
    )
    assert not result.timed_out and result.returncode == 3


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_to_the_harness_ends_the_agent(tmp_path, sig):
    """Ctrl-C, `timeout`'s SIGTERM or a hang-up reaches the harness alone (the agent leads its own session): the
    agent must not outlive it, and the harness exits as that signal's status says (Python's own for SIGINT)."""
    harness = (
        "import os, sys; from pathlib import Path; from ate_bench.procs import run_process_tree\n"
        "run_process_tree(['bash', '-c', sys.argv[1]], Path('.'), {'PATH': os.environ['PATH']}, 300,\n"
        "                 lambda t, line: print(line, flush=True), Path('stderr'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", harness, AGENT], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL),  # as at a terminal, even under `make test &` or nohup
    )  # fmt: skip
    files = [tmp_path / f"{name}.pid" for name in ("child", "grandchild", "escaped")]
    pids: list[int] = []
    try:
        assert proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 10
        while not all(f.is_file() and f.read_text().strip() for f in files) and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = [int(f.read_text()) for f in files]
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == (-sig if sig == signal.SIGINT else 128 + sig)
        deadline = time.monotonic() + 10  # signalled processes take a moment to die on a loaded machine
        while any(is_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in pids if is_alive(p)]
    finally:  # a failure here must not leave the fake agent running
        for pid in [proc.pid, *pids]:
            if is_alive(pid):
                os.kill(pid, signal.SIGKILL)
