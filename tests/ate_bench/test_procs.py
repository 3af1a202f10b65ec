"""The time limit kills the agent's whole process tree, including processes that left its group."""

import os
import time

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
