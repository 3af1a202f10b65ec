"""`python -S reaper.py CMD [ARGS...]`: run CMD so that nothing it starts can leave its process tree.

A process whose parent dies is re-parented to its nearest "child subreaper" ancestor, or to init where
there is none (prctl(2), PR_SET_CHILD_SUBREAPER). Claude Code's Bash tool starts each command in a session
of its own, so a background child (`nohup ... &`) that ignores SIGTERM is in neither the agent's process
group nor, once the agent exits, its tree: walking /proc from the agent no longer finds it. This process
marks itself a subreaper, so every such orphan becomes its child: while it lives the whole tree is under it.

It runs CMD, waits for it, then ends whatever CMD left (SIGTERM, a grace period, SIGKILL), reaps it, and
exits with CMD's status (128 + N for a signal N). It ignores SIGTERM itself, so that procs.kill_tree, which
sends SIGTERM and then SIGKILL to every process under it, still finds the tree under it in between.
"""

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script with -S: find ate_bench

from ate_bench.procs import KILL_GRACE_S, descendants, is_alive  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36


def end_leftovers() -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = descendants(os.getpid())
        for pid in left:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + KILL_GRACE_S
        while left and time.monotonic() < deadline:
            _reap()
            left = {p for p in left if is_alive(p)}
            time.sleep(0.05)
        if not left:
            return


def _reap() -> None:
    """Collect the exit status of every child that has ended (orphans become our children)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    # A handler, not SIG_IGN: an ignored signal stays ignored across exec, a handled one is reset for CMD.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        proc = subprocess.Popen(sys.argv[1:])
    except OSError as e:
        sys.exit(f"reaper: cannot run {sys.argv[1]!r}: {e}")
    returncode = proc.wait()
    end_leftovers()
    _reap()
    sys.exit(returncode if returncode >= 0 else 128 - returncode)


if __name__ == "__main__":
    main()
