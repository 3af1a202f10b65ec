"""Trajectories for the scripted endpoint, made from a task's gold at run time (scripted_endpoint.py has the format).

- Q&A: read every file the gold answer cites, then the gold answer. The answer is the gold script's output in
  this workspace, so it follows the task's gold and its answer format, never a copy of it.
- operate and feature: write the gold folder's files into the agent's TMPDIR (one shell turn, the files in
  here-documents: the gold folder itself is outside the workspace), run the gold there, then (feature) call
  the new op wrongly (a traceback) and run the provided verify.sh, then read the newest provided-script log,
  then a short final message.

The usage each turn reports grows with the turn, as a real session's context does; the numbers are only
checked against what the harness measures, never read as an agent's.
"""

import os
import re
import subprocess
from pathlib import Path

from ate_bench.tasks import TaskSpec

# The citation form of Q&A answers (ate_bench/README.md, "Q&A answers and keys").
CITATION = re.compile(r"(?P<path>[A-Za-z0-9_./-]+\.[A-Za-z0-9_]+):(?P<start>\d+)(?:-(?P<end>\d+))?")
GOLD_FILE_END = "ATE_SCRIPTED_GOLD_FILE_END"
NEWEST_LOG = 'cat "$(ls -t artifacts/*.log | head -n 1)"'
# A feature's op (artifacts/feature.json names it) called with None for every required argument: a Python
# traceback whose innermost frame lies in the file the gold changed, for the failure-locality analysis to read.
PROVOKE_TRACEBACK = (
    "python3 -c 'import importlib, inspect, json\n"
    'module, name = json.load(open("artifacts/feature.json"))["op"].split(":")\n'
    "op = getattr(importlib.import_module(module), name)\n"
    "op(*[None for p in inspect.signature(op).parameters.values() if p.default is p.empty])'"
)


def turn_usage(i: int) -> dict[str, int]:
    return {"input": 1500 + 250 * i, "cached": 1000 * i, "output": 60 + 15 * i}


def gold_trajectory(task: TaskSpec, framework: str, profile: str, workspace: Path) -> dict:
    """The trajectory of the task's gold on this workspace, as a trajectory file's JSON object."""
    gold = task.gold_script(framework)
    if not gold.is_file():
        raise ValueError(f"task {task.id} has no gold for {framework}: {task.gold_unrunnable(framework)}")
    if task.category == "qa":
        answer = _gold_answer(gold, workspace)
        cited = list(dict.fromkeys(m["path"].removeprefix("./") for m in CITATION.finditer(answer)))
        actions = [{"read": p} for p in cited if (workspace / p).is_file()] + [{"final": answer}]
    elif task.category in ("operate", "feature"):
        actions = [{"shell": _write_gold_files(gold.parent)}]
        actions += [{"shell": f'GOLD_DIR="$TMPDIR/gold" ATE_PROFILE={profile} bash "$TMPDIR/gold/{gold.name}"'}]
        actions += [{"shell": PROVOKE_TRACEBACK}, {"shell": "bash verify.sh"}] if task.category == "feature" else []
        actions += [{"shell": NEWEST_LOG}, {"final": f"Done: the gold of {task.id} ran, and its log is above."}]
    else:
        raise ValueError(f"task {task.id}: no gold trajectory for category {task.category!r}")
    return {"turns": [{**a, "usage": turn_usage(i)} for i, a in enumerate(actions)]}


def _gold_answer(gold: Path, workspace: Path) -> str:
    done = subprocess.run(
        ["bash", str(gold)],
        cwd=workspace,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GOLD_DIR": str(gold.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise ValueError(f"{gold}: the Q&A gold exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


def _write_gold_files(gold_dir: Path) -> str:
    """One shell command writing every file of the gold folder under $TMPDIR/gold."""
    parts = ['mkdir -p "$TMPDIR/gold"']
    for f in sorted(p for p in gold_dir.rglob("*") if p.is_file()):
        text = f.read_text()
        assert GOLD_FILE_END not in text, f
        rel = f.relative_to(gold_dir).as_posix()
        parts.append(f'mkdir -p "$(dirname "$TMPDIR/gold/{rel}")"\ncat > "$TMPDIR/gold/{rel}" <<\'{GOLD_FILE_END}\'')
        parts.append(text.rstrip("\n") + "\n" + GOLD_FILE_END)
    return "\n".join(parts)
