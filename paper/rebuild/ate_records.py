"""ATE-Bench run records (`results/ate/<run_id>/record.json`) as one table, and the tasks present.

Only records of real agents count as results: gold and noop runs (`agent.kind == "harness-validation"`)
validate the harness and are dropped here, and runs against a scripted model (`"pipeline-check"`) are read
only when asked for by kind, into outputs of their own (common.Build.run_kind). Medians are grouped by
everything that makes two runs different experiments (agent, model, framework source mode and version,
skills, and the skills overlaid on TorchTitan or Megatron-LM with `--skills-overlay`), as `ate_bench report` does.
"""

import json
import re
import tomllib
from pathlib import Path

import pandas as pd

RUN_SCHEMA = "ate-bench-run-1"
METRICS = {  # record key -> (column, scale to the shown unit)
    "session_duration_s": ("session_min", 1 / 60),
    "active_gpu_s": ("gpu_min", 1 / 60),
    "agent_turns": ("turns", 1),
    "context_tokens_median": ("context_tokens", 1),
    "output_tokens": ("output_tokens", 1),
}
GROUP = ["task", "profile", "framework", "agent", "model", "source", "skills", "skills_overlay"]
NO_KEY = "not measured (no agent key)"


def load_runs(results: Path, kind: str = "agent") -> tuple[pd.DataFrame, list[Path]]:
    """One row per run of this `agent.kind` with its five metrics; and the record files read."""
    rows, paths = [], []
    for path in sorted((results / "ate").glob("*/record.json")):
        rec = json.loads(path.read_text())
        if rec.get("schema") != RUN_SCHEMA or rec["agent"]["kind"] != kind:
            continue
        paths.append(path)
        fw, m = rec["framework"], rec.get("metrics") or {}
        row = {
            "run_id": rec["run_id"],
            "run_dir": str(path.parent),
            "task": rec["task"]["id"],
            "category": rec["task"]["category"],
            "slug": Path(rec["task"]["dir"]).name,
            "title": rec["task"]["title"],
            "framework": fw["name"],
            "source": f"{fw['mode']} {fw['version']}",
            "skills": fw["skills"],
            "skills_overlay": ",".join(fw.get("skills_overlay", [])) or "none",  # records before the overlay had none
            "agent": rec["agent"]["name"],
            "model": rec["agent"]["model"],
            "profile": rec["task"].get("profile", ""),
            "passed": bool(rec["verdict"]["passed"]),
        }
        for key, (col, scale) in METRICS.items():
            row[col] = m[key] * scale if key in m and m[key] is not None else None
        rows.append(row)
    cols = ["run_id", "run_dir", "task", "category", "slug", "title", "framework", "source", "skills", "skills_overlay"]
    cols += ["agent"]
    cols += ["model", "profile", "passed", *(c for c, _ in METRICS.values())]
    return pd.DataFrame(rows, columns=cols), paths


def medians(runs: pd.DataFrame) -> pd.DataFrame:
    """Median of each metric over repeats, with the number of runs and of passes."""
    metric_cols = [c for c, _ in METRICS.values()]
    g = runs.groupby(GROUP, dropna=False)
    out = g[metric_cols].median()
    out["runs"] = g.size()
    out["passed"] = [f"{p}/{n}" for p, n in zip(g["passed"].sum(), g.size())]
    return out.reset_index()


def load_tasks(tasks_dir: Path) -> pd.DataFrame:
    """Tasks present: id, category, slug, title, frameworks, from each task.toml (read loosely: a task being
    written must not stop the tables)."""
    rows = []
    for path in sorted(tasks_dir.glob("*/*/task.toml")):
        try:
            t = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError:
            continue
        if {"id", "category"} <= set(t):
            rows.append(
                {
                    "task": t["id"],
                    "category": t["category"],
                    "slug": path.parent.name,
                    "title": t.get("title", ""),
                    "frameworks": tuple(t.get("frameworks", ())),
                    "profiles": tuple(t.get("profiles", ())),
                }
            )
    return pd.DataFrame(rows, columns=["task", "category", "slug", "title", "frameworks", "profiles"])


def paper_task(paper_tasks: list[dict], category: str, slug: str, title: str) -> dict | None:
    """The paper's row for a task: same category, `match` found in its directory name or title."""
    for p in paper_tasks:
        if p["category"] == category and re.search(p["match"], f"{slug} {title}", re.IGNORECASE):
            return p
    return None
