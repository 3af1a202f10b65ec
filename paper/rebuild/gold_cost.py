"""Result 8, what each gold costs to write (issue 28; the agent-free view of the MoBA case study): per operate and
feature task and framework, the files and lines of its gold (`tasks/<category>/<slug>/gold/<framework>/`) and how
many validation runs of `results/ate/validation/*.json` its gold cell took before its first PASS, per profile.

A feature gold is a patch that its solve.sh applies: its size is the patch's own diff stats (`git apply --numstat`).
An operate gold's solve.sh writes or runs files of its own: its size is the gold folder's files and all their lines.
A run is a record in which the gold cell has a verdict; a record that holds it as "not run" counts for nothing.
"""

import json
import re
from pathlib import Path

import pandas as pd

from paper.rebuild.ate_records import load_tasks
from paper.rebuild.common import FRAMEWORKS, MEASURED, NOT_MEASURED, Build

NO_GOLD, NOT_RUN, PASS = "no gold", "not run", "PASS"
CATEGORIES = ("operate", "feature")
MEASURE = {"feature": "the patch's diff stats", "operate": "the gold folder's files and lines"}


HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def patch_stats(patch: Path) -> tuple[int, int, int]:
    """Files, lines added and removed, as `git apply --numstat` counts them. Parsed here: git run inside a checkout
    ignores a patch's paths outside its working folder. Hunk lengths tell a removed `--- x` line from a header."""
    files = headers = added = removed = old_left = new_left = 0
    for line in patch.read_text().splitlines():
        if old_left or new_left:
            if line.startswith("+"):
                added, new_left = added + 1, new_left - 1
            elif line.startswith("-"):
                removed, old_left = removed + 1, old_left - 1
            elif not line.startswith("\\"):  # "\ No newline at end of file" is no line of either side
                old_left, new_left = old_left - 1, new_left - 1
        elif line.startswith("diff --git "):
            files += 1
        elif line.startswith("+++ "):
            headers += 1
        elif m := HUNK.match(line):
            old_left, new_left = int(m[1] or 1), int(m[2] or 1)
    return files or headers, added, removed


def gold_size(gold: Path, category: str) -> tuple[dict, list[Path]]:
    """The gold's files touched, lines added and removed, and the files that were measured."""
    if category == "feature":
        measured = sorted(gold.glob("*.patch"))
        stats = [patch_stats(p) for p in measured]
        files, added, removed = (sum(s[i] for s in stats) for i in range(3))
    else:  # every file is new to the workspace: all its lines are added, none removed
        # not Python's bytecode, which running a gold's script here leaves beside it (a .pyc counted as a file once)
        measured = sorted(p for p in gold.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        files, added, removed = len(measured), sum(p.read_bytes().count(b"\n") for p in measured), 0
    return {"gold_files": files, "gold_lines_added": added, "gold_lines_removed": removed}, measured


def gold_runs(results: Path, slug_to_task: dict[str, str]) -> tuple[dict[tuple, list[str]], list[Path]]:
    """(task, framework, profile) -> the verdicts of its gold cell, oldest record first (records are named by their
    UTC stamp), "not run" left out; and the records read. Besides `validate`'s records, the operate golds' gpu1 calls
    (tasks/operate/gpu1_golds.sh: results/ate/gpu1/*-operate-gpu1*.json, cells named by the task's folder)."""
    validation = sorted((results / "ate" / "validation").glob("*.json"))
    operate_gpu1 = sorted((results / "ate" / "gpu1").glob("*-operate-gpu1*.json"))
    runs = {}
    for path in sorted(validation + operate_gpu1, key=lambda p: p.name):
        for c in json.loads(path.read_text()).get("cells", []):
            task = slug_to_task.get(c["task"], c["task"])
            if c.get("kind", c.get("case")) == "gold" and c["verdict"] != NOT_RUN:
                runs.setdefault((task, c["framework"], c["profile"]), []).append(c["verdict"])
    return runs, validation + operate_gpu1


def attempts(verdicts: list[str]) -> dict[str, object]:
    """Runs that were not PASS before the first PASS ("no PASS" when none passed), and all runs."""
    if not verdicts:
        return {"runs_before_pass": NOT_RUN, "runs": NOT_RUN}
    before = verdicts.index(PASS) if PASS in verdicts else "no PASS"
    return {"runs_before_pass": before, "runs": len(verdicts)}


def framework_order(framework: str) -> tuple:
    return (FRAMEWORKS.index(framework) if framework in FRAMEWORKS else len(FRAMEWORKS), framework)


def gold_row(b: Build, task, framework: str, profiles: list[str], runs: dict) -> tuple[dict, list[Path]]:
    """One task and framework: the gold's size and, per profile, its runs; "no gold" in every cell without one."""
    row = {"task": task.task, "framework": framework, "measure": MEASURE[task.category]}
    cols = ["gold_files", "gold_lines_added", "gold_lines_removed"]
    cols += [f"{p}_{k}" for p in profiles for k in ("runs_before_pass", "runs")]
    gold = b.tasks / task.category / task.slug / "gold" / framework
    if not gold.is_dir():
        return row | dict.fromkeys(cols, NO_GOLD), []
    size, measured = gold_size(gold, task.category)
    row |= size
    for p in profiles:
        row |= {f"{p}_{k}": v for k, v in attempts(runs.get((task.task, framework, p), [])).items()}
    return row, measured


def cost_table(b: Build) -> tuple[pd.DataFrame, list[Path], int]:
    """Every operate and feature task x framework; the files read; how many validation records were read."""
    tasks = load_tasks(b.tasks)
    tasks = tasks[tasks["category"].isin(CATEGORIES)].sort_values("task")
    profiles = list(dict.fromkeys(p for ps in tasks["profiles"] for p in ps))
    runs, records = gold_runs(b.results, dict(zip(tasks["slug"], tasks["task"])))
    rows, inputs = [], list(records)
    for t in tasks.itertuples():
        inputs.append(b.tasks / t.category / t.slug / "task.toml")
        for fw in sorted(t.frameworks, key=framework_order):
            row, measured = gold_row(b, t, fw, profiles, runs)
            rows.append(row)
            inputs += measured
    return pd.DataFrame(rows), inputs, len(records)


def build(b: Build) -> None:
    table, inputs, n_records = cost_table(b)
    has_gold = len(table) and (table["gold_files"] != NO_GOLD).any()
    status = MEASURED if has_gold else f"{NOT_MEASURED}: no operate or feature gold under {b.rel(b.tasks)}"
    if not len(table):
        table = pd.DataFrame([{"task": "(none)", "framework": "", "measure": status}])
    notes = [
        "files and lines: " + "; ".join(f"{c} golds, {m}" for c, m in MEASURE.items()) + " (a feature gold's "
        "solve.sh and feature.json, which apply the patch and switch the feature on, are not counted; an operate "
        "gold's lines are all added, none removed)",
        f"runs: validation runs in the {n_records} records kept in results/ate/validation/ (`nox -s validate`) and "
        "results/ate/gpu1/ (the operate golds' gpu1 calls, tasks/operate/gpu1_golds.sh) in which the gold cell has a "
        "verdict, oldest first; not agent attempts, and not every run made while the gold was written (only the "
        "records kept here)",
        "runs_before_pass: runs not PASS before the first PASS ('no PASS' if none passed); 'not run': no validation "
        "record ran the cell (the task's [unrunnable] says why where it cannot run); 'no gold': no gold/<framework>/ "
        "folder, nothing to measure",
    ]
    stands = "What each gold costs to write: files and lines of the gold, validation runs to its first PASS"
    b.table("gold_cost", table, inputs, status, stands, notes)
