"""Result 6: the checker validation matrix (task x framework x profile x case -> verdict) from
`results/ate/validation/*.json`, and the agent-free costs from `results/ate/cost/*.json`.

Several validate calls may cover different tasks; each cell is taken from the newest record that holds it and
ran it (a newer "not run" never hides a verdict). A "not run" cell keeps its reason and is never counted as
passed. A cell (or cost row) whose task folder, or pithtrain's code for a pithtrain workspace, changed since
the record's commit is marked stale naming that commit (column `fresh`); `make reproduce` re-measures them.
"""

import json

import pandas as pd

from paper.rebuild.ate import load_costs
from paper.rebuild.ate_records import load_tasks
from paper.rebuild.common import (
    FRAMEWORKS,
    MEASURED,
    NOT_MEASURED,
    Build,
    framework_colour,
    nothing_measured,
    one_line,
    stale_since,
)

NOT_RUN = "not run"
CELL_COLS = ["task", "framework", "profile", "case", "kind", "expected", "verdict", "outcome", "fresh", "reasons"]
CELL_COLS += ["record"]


def outcome(expected: str, verdict: str) -> str:
    if verdict == NOT_RUN:
        return NOT_RUN
    return "as expected" if verdict == expected else "UNEXPECTED"


def task_paths(b: Build) -> dict[str, str]:
    """Task id -> its folder, relative to the repository (what a cell's gold and key are made of)."""
    tasks = load_tasks(b.tasks)
    return {t.task: b.rel(b.tasks / t.category / t.slug) for t in tasks.itertuples()}


def freshness(commit: str, task: str, framework: str, paths: dict[str, str]) -> str:
    """ "" or why a cell (or a cost row) made at `commit` is stale: its task changed since, or pithtrain's code for a
    pithtrain workspace (the other frameworks are pinned in the task)."""
    watched = (paths.get(task, "tasks"), "pithtrain") if framework == "pithtrain" else (paths.get(task, "tasks"),)
    return stale_since(commit or "", watched)


def load_cells(b: Build) -> tuple[pd.DataFrame, list]:
    """Each cell from the newest record that holds it and ran it: a newer "not run" never hides a verdict."""
    cells, paths, tasks = {}, [], task_paths(b)
    for path in sorted((b.results / "ate" / "validation").glob("*.json")):
        rec = json.loads(path.read_text())
        paths.append(path)
        for c in rec["cells"]:
            key = (c["task"], c["framework"], c["profile"], c["case"])
            if c["verdict"] == NOT_RUN and key in cells and cells[key]["verdict"] != NOT_RUN:
                continue
            cells[key] = c | {
                "outcome": outcome(c["expected"], c["verdict"]),
                "reasons": "; ".join(one_line(r) for r in c["reasons"]),
                "record": path.name,
                "fresh": freshness(rec.get("commit"), c["task"], c["framework"], tasks) or "yes",
            }
    return pd.DataFrame(cells.values(), columns=CELL_COLS), paths


def summarise(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The per task and framework counts (with the reasons of what did not run) and the case matrix."""
    summary = (
        cells.groupby(["task", "framework", "profile"])["outcome"]
        .value_counts()
        .unstack(fill_value=0)
        .reindex(columns=["as expected", "UNEXPECTED", NOT_RUN], fill_value=0)
        .reset_index()
    )
    runs, stale = cells[cells["outcome"] == NOT_RUN], cells[cells["fresh"] != "yes"]
    of = [(cells["task"] == r.task) & (cells["framework"] == r.framework) for r in summary.itertuples()]
    summary["not_run_reasons"] = ["; ".join(sorted(set(runs[m[runs.index]]["reasons"]))) for m in of]
    summary["stale"] = ["; ".join(sorted(set(stale[m[stale.index]]["fresh"]))) for m in of]
    summary["records"] = [", ".join(sorted(set(cells[m]["record"]))) for m in of]  # which call each count is from
    verdict = cells["verdict"].where(cells["outcome"] != "UNEXPECTED", cells["verdict"] + " (UNEXPECTED)")
    shown = cells.assign(shown=verdict.where(cells["fresh"] == "yes", verdict + " (stale)"))
    matrix = shown.pivot_table(
        index=["task", "framework", "profile"], columns="case", values="shown", aggfunc="first"
    ).reset_index()
    matrix.columns.name = None
    notes = [f"{len(cells)} cells: " + ", ".join(f"{k} {v}" for k, v in cells["outcome"].value_counts().items())]
    notes.append(f"{len(stale)} cells stale (their task or pithtrain changed since their record; column fresh)")
    return summary, matrix, notes


def matrix_figure(b: Build, cells: pd.DataFrame, paths, status: str, notes) -> None:
    import matplotlib.pyplot as plt
    import seaborn as sns

    codes = {"as expected": 0, "UNEXPECTED": 1, NOT_RUN: 2}
    rows = cells[["task", "framework", "profile"]].drop_duplicates()
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.18 * max(1, len(rows)))))
    if status == MEASURED:
        stale = cells["fresh"].ne("yes").groupby(cells["task"] + " " + cells["framework"] + " " + cells["profile"])
        mark = {row: " (stale)" if any_stale else "" for row, any_stale in stale.any().items()}
        grid = cells.assign(code=cells["outcome"].map(codes), row=cells["task"] + " " + cells["framework"] + " "
                            + cells["profile"])  # fmt: skip
        grid["row"] = grid["row"] + grid["row"].map(mark)
        heat = grid.pivot_table(index="row", columns="case", values="code", aggfunc="max")
        sns.heatmap(heat, cmap=["#55a868", "#c44e52", "#bbbbbb"], vmin=-0.5, vmax=2.5, cbar=False, linewidths=0.5,
                    yticklabels=True, ax=ax)  # fmt: skip
        title = "green: as expected, red: UNEXPECTED, grey: not run (reason in validation_cells.csv);\n"
        ax.set_title(title + "(stale): a cell of the row was made before its task or pithtrain changed", fontsize=8)
        ax.tick_params(labelsize=6)
        ax.set_ylabel("")
    else:
        nothing_measured(ax, status)
    b.figure("validation_matrix", fig, paths, status, "Checker validation matrix figure", notes)
    plt.close(fig)


BLIND_KINDS = {
    "blind-correct": "correct PASS",
    "blind-wrong": "wrong FAIL",
    "blind-cited": "wrong + right citations FAIL",
}


def blind_rates(cells: pd.DataFrame) -> pd.DataFrame:
    """Per blind set and framework: the share of blind answers judged as expected, by kind (`x/n` and %)."""
    blind = cells[cells["kind"].isin(list(BLIND_KINDS)) & (cells["outcome"] != NOT_RUN)]
    blind = blind.assign(set=blind["case"].str.split("/").str[0], ok=blind["outcome"] == "as expected")
    rows = []
    for (set_name, fw), g in blind.groupby(["set", "framework"]):
        row = {"set": set_name, "framework": fw}
        for kind, label in BLIND_KINDS.items():
            k = g[g["kind"] == kind]
            row[label] = f"{int(k['ok'].sum())}/{len(k)} ({100 * k['ok'].mean():.0f}%)" if len(k) else "none"
        rows.append(row)
    return pd.DataFrame(rows, columns=["set", "framework", *BLIND_KINDS.values()])


def blind_figure(b: Build, cells: pd.DataFrame, paths: list, status: str) -> None:
    """Bars: per framework and blind set, the share of correct answers judged PASS and of wrong ones FAIL."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    blind = cells[cells["kind"].isin(list(BLIND_KINDS)) & (cells["outcome"] != NOT_RUN)]
    fig, ax = plt.subplots(figsize=(8, 3))
    if len(blind):
        shares = blind.assign(
            set=blind["case"].str.split("/").str[0],
            what=blind["kind"].map(BLIND_KINDS),
            percent=100.0 * (blind["outcome"] == "as expected"),
        )
        shares = shares.assign(group=shares["set"] + ": " + shares["what"])
        sns.barplot(data=shares, x="framework", y="percent", hue="group", errorbar=None, ax=ax)
        ax.set_ylim(0, 105)
        ax.set_ylabel("% judged as expected")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig_status = status
    else:
        fig_status = status if status != MEASURED else f"{NOT_MEASURED}: no blind-answer cell in the records"
        ax.text(0.5, 0.5, fig_status, ha="center", va="center", wrap=True, fontsize=9)
        ax.set_axis_off()
    b.figure("validation_blind", fig, paths, fig_status, "Q&A checkers on blind answers: rates per set and framework")


def build(b: Build) -> None:
    cells, paths = load_cells(b)
    how = "`python -m ate_bench validate` (nox -s validate)"
    if len(cells):
        status = MEASURED
        cells = cells.sort_values(["task", "framework", "profile", "case"])
        summary, matrix, notes = summarise(cells)
    else:
        status = f"{NOT_MEASURED}: no validation record; run {how}"
        cells = pd.DataFrame([dict.fromkeys(CELL_COLS, "") | {"outcome": status}])
        summary = pd.DataFrame([{"task": "(none)", "framework": "", "profile": "", "as expected": 0, "UNEXPECTED": 0,
                                 NOT_RUN: 0, "not_run_reasons": status}])  # fmt: skip
        matrix = pd.DataFrame([{"task": "(none)", "framework": "", "profile": "", "gold": status}])
        notes = []
    stands = "Checker validation matrix: every task's gold must PASS and every wrong answer FAIL"
    b.table("validation_matrix", matrix, paths, status, stands, notes)
    b.table(
        "validation_cells", cells, paths, status, "Checker validation: every cell with expected verdict and reasons"
    )
    b.table("validation_summary", summary, paths, status, "Checker validation per task and framework: cells by outcome")
    matrix_figure(b, cells, paths, status, notes)
    blind_outputs(b, cells, paths, status)
    cost_outputs(b)


def blind_outputs(b: Build, cells: pd.DataFrame, paths: list, status: str) -> None:
    blind = blind_rates(cells) if status == MEASURED else pd.DataFrame()
    if blind.empty:
        blind = pd.DataFrame([{"set": "(none)", "framework": "no blind-answer cell in the validation records"}])
    b.table(
        "validation_blind",
        blind,
        paths,
        status,
        "Q&A checkers on answers written blind to the keys: correct PASS and wrong FAIL per set and framework",
        ["set1 was used to revise the keys; later sets were written after the freeze (tasks/qa/README.md)"],
    )
    blind_figure(b, cells if status == MEASURED else cells.iloc[0:0], paths, status)


def cost_bars(ax, costs: pd.DataFrame) -> None:
    """Lines to cite per task, one colour per framework, hatched where the row is stale, values on the bars."""
    from matplotlib.patches import Patch

    tasks, width = sorted(set(costs["task"])), 0.8 / len(FRAMEWORKS)
    for j, fw in enumerate(FRAMEWORKS):
        part = costs[costs["framework"] == fw].set_index("task")
        xs = [i for i, t in enumerate(tasks) if t in part.index]
        bars = ax.bar([x + (j - 1) * width for x in xs], [part.loc[tasks[x], "cited_lines"] for x in xs], width,
                      color=framework_colour(fw), edgecolor="#333333", linewidth=0.3,
                      hatch=[("xx" if part.loc[tasks[x], "fresh"] != "yes" else "") for x in xs])  # fmt: skip
        ax.bar_label(bars, labels=[f"{v:,.0f}" for v in bars.datavalues], fontsize=5, padding=1)
    ax.set_xticks(range(len(tasks)), tasks, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("lines of the files to cite (log)")
    keys = [Patch(color=framework_colour(f), label=f) for f in FRAMEWORKS]
    keys.append(Patch(facecolor="white", edgecolor="#333333", hatch="xx", label="stale: task changed since"))
    ax.legend(handles=keys, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def cost_outputs(b: Build) -> None:
    import matplotlib.pyplot as plt

    costs, cost_paths = load_costs(b.results)
    notes = [
        "lines/bytes of the files the key's facts name; files matching the key term out of all source files; "
        "the most import hops from the training entry point to a cited file"
    ]
    if len(costs):
        cstatus, tasks = MEASURED, task_paths(b)
        costs["fresh"] = [freshness(r.cost_commit, r.task, r.framework, tasks) or "yes" for r in costs.itertuples()]
        notes.append(
            f"{(costs['fresh'] != 'yes').sum()} rows stale (their task or pithtrain changed since; column fresh)"
        )
    else:
        cstatus = f"{NOT_MEASURED}: no cost record; run `python -m ate_bench cost`"
        costs = costs.reindex([0]).assign(task="(none)", framework="", cost_source=cstatus)
    stands = "Agent-free cost per Q&A task and framework (a reproducible floor under the agent's exploration)"
    b.table("agent_free_cost", costs, cost_paths, cstatus, stands, notes)
    fig, ax = plt.subplots(figsize=(11, 3.6))
    if cstatus == MEASURED:
        cost_bars(ax, costs)
    else:
        nothing_measured(ax, cstatus)
    b.figure(
        "agent_free_cost", fig, cost_paths, cstatus, "Agent-free cost figure: lines an answer must cite from", notes
    )
    plt.close(fig)
