"""Result 3, ATE-Bench per task: the five metrics per framework (median over repeats, n shown), the paper's
blog numbers beside (labelled), and for Q&A the agent-free cost of `ate_bench cost`.

Records: agent runs `results/ate/*/record.json` (skills kept: the ablation shows the other arm), cost
records `results/ate/cost/*.json` (per task and framework the newest wins). A task and framework with no
agent run says "not measured (no agent key)" in every metric cell.
"""

import json
import textwrap
from pathlib import Path

import pandas as pd

from paper.rebuild.ate_records import GROUP, METRICS, NO_KEY, load_runs, load_tasks, medians, paper_task
from paper.rebuild.common import (
    FRAMEWORKS,
    MEASURED,
    NOT_MEASURED,
    PAPERS,
    Build,
    fit_labels,
    framework_colour,
    nothing_measured,
)

CATEGORIES = {"qa": "Q&A", "operate": "Operate and profile", "feature": "New features"}
METRIC_COLS = [c for c, _ in METRICS.values()]
PAPER_COLS = {"gpu_min": "paper_gpu_min", "turns": "paper_turns", "output_tokens": "paper_output_tokens"}
COST_COLS = ["cited_files", "cited_lines", "cited_bytes", "term_files", "source_files", "max_hops", "cost_source"]
BASE_COLS = ["task", "title", "framework", "profile", "agent", "model", "source", "skills_overlay", "runs", "passed"]


def load_costs(results: Path) -> tuple[pd.DataFrame, list[Path]]:
    """Newest cost row per (task, framework) over every cost record."""
    rows, used = {}, []
    for path in sorted((results / "ate" / "cost").glob("*.json")):
        rec = json.loads(path.read_text())
        for r in rec.get("rows", []):
            ws = rec.get("workspaces", {}).get(r["framework"], {})
            rows[(r["task"], r["framework"])] = {
                "task": r["task"],
                "framework": r["framework"],
                "cited_files": len(r["cited"]),
                "cited_lines": r["cited_lines"],
                "cited_bytes": r["cited_bytes"],
                "term_files": r["term_files"],
                "source_files": r["source_files"],
                "max_hops": "unreachable" if r["unreachable"] else r["max_hops"],
                "cost_source": f"{ws.get('mode', '?')} {ws.get('version', '?')} tree {ws.get('tree_sha256', '?')[:12]}",
                "cost_commit": rec.get("commit", ""),
                "_path": path,
            }
    df = pd.DataFrame(rows.values(), columns=["task", "framework", *COST_COLS, "cost_commit", "_path"])
    used = sorted(set(df["_path"]))
    return df.drop(columns="_path"), used


def task_rows(b: Build, tasks: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Every (task, framework) present or reported, with medians where agent runs exist."""
    kept = runs[runs["skills"] == "kept"]
    med = medians(kept) if len(kept) else pd.DataFrame(columns=[*GROUP, *METRIC_COLS, "runs", "passed"])
    known = tasks.set_index("task") if len(tasks) else tasks
    ids = sorted(set(tasks["task"]) | set(runs["task"]))
    rows, matched = [], set()
    for tid in ids:
        t = known.loc[tid] if tid in known.index else runs[runs["task"] == tid].iloc[0]
        fws = list(t["frameworks"]) if "frameworks" in t and len(t["frameworks"]) else list(FRAMEWORKS)
        paper = paper_task(b.paper["ate"]["tasks"], t["category"], t["slug"], t["title"])
        matched |= {paper["name"]} if paper else set()
        for fw in fws:
            base = {"task": tid, "category": t["category"], "title": t["title"], "framework": fw}
            base |= {pc: paper.get(c, {}).get(fw) if paper else None for c, pc in PAPER_COLS.items()}
            got = med[(med["task"] == tid) & (med["framework"] == fw)].drop(columns=["task", "framework"])
            if len(got):
                rows += [base | r | {"status": MEASURED} for r in got.to_dict("records")]
            else:
                rows.append(base | dict.fromkeys(METRIC_COLS, NO_KEY) | {"runs": 0, "status": NO_KEY})
    for p in b.paper["ate"]["tasks"]:  # reported by the paper, not (yet) in tasks/ nor in any record
        if p["name"] not in matched:
            for fw in FRAMEWORKS:
                base = {"task": "(absent)", "category": p["category"], "title": p["name"], "framework": fw}
                base |= {pc: p.get(c, {}).get(fw) for c, pc in PAPER_COLS.items()}
                why = f"{NO_KEY}; the task is not in tasks/ yet"
                rows.append(base | dict.fromkeys(METRIC_COLS, NO_KEY) | {"runs": 0, "status": why})
    cols = ["category", *BASE_COLS, *METRIC_COLS, *PAPER_COLS.values(), "status"]
    return pd.DataFrame(rows).reindex(columns=cols)


def build(b: Build) -> None:

    runs, run_paths = load_runs(b.results, b.run_kind)
    tasks = load_tasks(b.tasks)
    costs, cost_paths = load_costs(b.results)
    table = task_rows(b, tasks, runs)
    src = b.paper["ate"]["source"]
    notes = [f"{PAPERS} in paper_* columns ({src}); empty where the paper reports none"]
    notes.append("gold and noop runs validate the harness: never counted here")
    for cat, name in CATEGORIES.items():
        part = table[table["category"] == cat].drop(columns="category")
        inputs = [p for p in run_paths if p.parent.name.startswith(tuple(part["task"]))] if len(part) else []
        cat_notes = list(notes)
        if cat == "qa":
            part = part.merge(costs, on=["task", "framework"], how="left")
            part["cited_lines"] = (
                part["cited_lines"]
                .astype(object)
                .where(part["cited_lines"].notna(), "not measured: run `python -m ate_bench cost`")
            )
            inputs += cost_paths
            cat_notes.append(
                "agent-free cost (`python -m ate_bench cost`): lines and bytes of the files the key's facts name, "
                "files matching the key term, most import hops from the training entry point"
            )
            cat_notes.append(b.paper["ate"]["qa"]["claim"] + f" ({PAPERS}, {src})")
        measured = (part["status"] == MEASURED).any() if len(part) else False
        status = (
            MEASURED
            if measured
            else f"{NOT_MEASURED}: no agent records (needs an agent key: `nox -s ate -- --agent claude-code`)"
        )
        if not len(part):
            part = pd.DataFrame([{"task": "(none)", "status": f"{NOT_MEASURED}: no {name} task in tasks/ yet"}])
        b.table(f"ate_{cat}", part, inputs, status, f"ATE-Bench {name}: five metrics per task and framework", cat_notes)

    figures(b, table, run_paths, notes)


def figure_values(table: pd.DataFrame) -> pd.DataFrame:
    """Long form: one row per (task, framework, metric, source) that has a value, ours or the paper's."""
    long = []
    for r in table.itertuples():
        task = f"{r.task} " + textwrap.shorten(r.title.split(":")[0], 34, placeholder="...")
        for metric, pcol in (("turns", "paper_turns"), ("gpu_min", "paper_gpu_min")):
            base = {"metric": metric, "category": CATEGORIES[r.category], "task": task, "framework": r.framework}
            val = getattr(r, metric)
            if r.status == MEASURED and val is not None and pd.notna(val):
                long.append(base | {"source": MEASURED, "value": float(val)})
            if pd.notna(getattr(r, pcol)):
                long.append(base | {"source": PAPERS, "value": float(getattr(r, pcol))})
    return pd.DataFrame(long, columns=["metric", "source", "category", "task", "framework", "value"])


def category_panel(ax, part: pd.DataFrame, ylabel: str) -> None:
    """Bars per task: one colour per framework, the paper's hatched and pale beside ours, values on top."""
    tasks, width = sorted(set(part["task"])), 0.8 / (2 * len(FRAMEWORKS))
    for j, fw in enumerate(FRAMEWORKS):
        for k, source in enumerate((PAPERS, MEASURED)):
            got = part[(part["framework"] == fw) & (part["source"] == source)].set_index("task")["value"]
            xs = [i for i, t in enumerate(tasks) if t in got.index]
            if not xs:
                continue
            offset = (2 * j + k - len(FRAMEWORKS) + 0.5) * width
            bars = ax.bar([x + offset for x in xs], [got[tasks[x]] for x in xs], width, color=framework_colour(fw),
                          alpha=0.45 if source == PAPERS else 1.0, hatch="//" if source == PAPERS else "",
                          edgecolor="#333333", linewidth=0.3)  # fmt: skip
            ax.bar_label(
                bars, labels=[f"{v:.1f}" if v < 10 else f"{v:.0f}" for v in bars.datavalues], fontsize=5, padding=1
            )
    ax.set_xticks(range(len(tasks)), tasks)
    fit_labels(ax, 12)
    ax.tick_params(axis="x", labelsize=6)
    ax.set_ylabel(ylabel, fontsize=8)


def figures(b: Build, table: pd.DataFrame, run_paths, notes) -> None:
    """Turns and GPU minutes per task, one panel per category with data; one panel saying so where none."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    values, any_measured = figure_values(table), (table["status"] == MEASURED).any()
    status = MEASURED if any_measured else f"{PAPERS} only; {NO_KEY}"
    for metric, ylabel, name in (
        ("turns", "agent turns", "ate_turns"),
        ("gpu_min", "active GPU minutes", "ate_gpu_time"),
    ):
        d = values[values["metric"] == metric]
        cats = [c for c in CATEGORIES.values() if (d["category"] == c).any()]
        widths = [max(2, d[d["category"] == c]["task"].nunique()) for c in cats] or [1]
        fig, axes = plt.subplots(1, len(widths), figsize=(1.6 * sum(widths) + 1, 4.4), squeeze=False,
                                 gridspec_kw={"width_ratios": widths})  # fmt: skip
        for ax, cat in zip(axes[0], cats):
            category_panel(ax, d[d["category"] == cat], ylabel)
            ax.set_title(cat, fontsize=9)
        if not cats:
            nothing_measured(axes[0][0], f"{ylabel}: none measured here ({NO_KEY}) and none reported by the paper")
        keys = [Patch(color=framework_colour(f), label=f) for f in FRAMEWORKS]
        ours = MEASURED if any_measured else f"{MEASURED}: none ({NO_KEY})"
        keys += [Patch(facecolor="#999999", alpha=0.45, hatch="//", label=f"{PAPERS} (blog)"),
                 Patch(facecolor="#999999", label=ours)]  # fmt: skip
        fig.legend(handles=keys, loc="lower center", ncol=len(keys), fontsize=7, frameon=False)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        b.figure(name, fig, run_paths, status, f"ATE-Bench per task: {ylabel}", notes)
        plt.close(fig)
