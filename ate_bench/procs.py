"""Launching the agent in its own process group, and ending its whole process tree.

The agent runs as the leader of a new session (`start_new_session=True`), so `killpg` reaches every
process it started unless one of them left the group itself (a `setsid` in a training launcher, a
daemonised server). Those are found by walking parent links in /proc and killed too. The agent's parent
is reaper.py, a child subreaper: a process orphaned in another session (Claude Code's Bash tool starts
each command in one) stays under it instead of going to init, where no walk from the agent finds it.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Seconds between SIGTERM and SIGKILL when a run is stopped.
KILL_GRACE_S = 5.0
REAPER = Path(__file__).with_name("reaper.py")


def _parents() -> dict[int, int]:
    """pid -> parent pid for every process visible in /proc."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) is in parentheses and may hold spaces: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        out[int(d.name)] = int(fields[1])
    return out


def descendants(root: int) -> set[int]:
    """Every process whose chain of parents reaches `root` (root excluded)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def make_tree_predicate(root: int) -> Callable[[int], bool]:
    """True for the agent's session members and descendants; what the GPU sampler attributes to it."""

    def is_agent_pid(pid: int) -> bool:
        try:
            if os.getsid(pid) == root:
                return True
        except OSError:
            return False
        return pid in descendants(root)

    return is_agent_pid


def kill_tree(root: int) -> None:
    """SIGTERM the agent's group and descendants, then SIGKILL whatever is left after a grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = descendants(root) | {root}
        try:
            os.killpg(root, sig)
        except OSError:
            pass
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + KILL_GRACE_S
            while time.monotonic() < deadline and any(is_alive(p) for p in pids):
                time.sleep(0.1)
            if not any(is_alive(p) for p in pids) and not _group_exists(root):
                return  # all gone (the usual clean exit): spare the second /proc walk


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"


def _exit_on_signal(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP (`timeout`, a cancelled job, a closed terminal) raise SystemExit while a tree runs.

    By default they end Python at once, running no `finally`: the tree, leading a session of its own, would go on
    (a lane that `timeout` ended left its checker training on the GPU). Raised, they end it as Ctrl-C does. A signal
    the caller ignores (`nohup`) stays ignored, and only the main thread may set handlers.
    """
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                previous[sig] = signal.signal(sig, _exit_on_signal)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class ProcessResult:
    returncode: int
    timed_out: bool
    start: float
    """Unix time of launch."""
    end: float
    """Unix time the agent exited or was killed."""


def run_process_tree(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    time_limit_s: float,
    on_line: Callable[[float, str], None],
    stderr_path: Path,
    on_start: Callable[[int], None] = lambda pid: None,
) -> ProcessResult:
    """Run `argv` under reaper.py as a session leader; stamp each stdout line as it arrives; kill the tree on
    timeout, and on exit whatever is left of it.

    `on_line(t, line)` gets the Unix time a line was read (stream-json carries no timestamps of its own).
    `on_start(pid)` runs once the process exists (the GPU sampler starts there).
    """
    start = time.time()
    with open(stderr_path, "wb") as err, _terminate_as_interrupt():
        proc = subprocess.Popen(
            [sys.executable, "-S", str(REAPER), *argv],  # the tree stays under one process: reaper.py says why
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
        on_start(proc.pid)

        def pump() -> None:
            for raw in proc.stdout:
                on_line(time.time(), raw.decode("utf-8", errors="replace").rstrip("\n"))

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        # A blocking wait in a thread, not Popen.wait(timeout), which polls with sleeps of up to 50 ms:
        # the validation matrix runs hundreds of short checkers and would wait on each.
        exited = threading.Event()
        threading.Thread(target=lambda: (proc.wait(), exited.set()), daemon=True).start()
        try:
            timed_out = not exited.wait(timeout=time_limit_s)
        finally:  # Ctrl-C of the harness (KeyboardInterrupt), SIGTERM and SIGHUP end the agent too, never leave it
            end = time.time()
            # Also on a clean exit: a training run the agent left in the background must not outlive it.
            kill_tree(proc.pid)
            proc.wait()
        reader.join(timeout=5.0)
    return ProcessResult(returncode=proc.returncode, timed_out=timed_out, start=start, end=end)
