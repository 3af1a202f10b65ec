"""Result 6: the checker validation matrix (task x framework x profile x case -> verdict) from
`results/ate/validation/*.json`, and the agent-free costs from `results/ate/cost/*.json`.

Several validate calls may cover different tasks; each cell is taken from the newest record that holds it.
A "not run" cell keeps its reason and is never counted as passed.
"""

import json

import pandas as pd

from paper.rebuild.ate import load_costs
from paper.rebuild.common import MEASURED, NOT_MEASURED, Build

NOT_RUN = "not run"
CELL_COLS = ["task", "framework", "profile", "case", "kind", "expected", "verdict", "outcome", "reasons", "record"]


def outcome(expected: str, verdict: str) -> str:
    if verdict == NOT_RUN:
        return NOT_RUN
    return "as expected" if verdict == expected else "UNEXPECTED"


def load_cells(b: Build) -> tuple[pd.DataFrame, list]:
    cells, paths = {}, []
    for path in sorted((b.results / "ate" / "validation").glob("*.json")):
        rec = json.loads(path.read_text())
        paths.append(path)
        for c in rec["cells"]:
            cells[(c["task"], c["framework"], c["profile"], c["case"])] = c | {
                "outcome": outcome(c["expected"], c["verdict"]),
                "reasons": "; ".join(c["reasons"])[:300],
                "record": path.name,
            }
    return pd.DataFrame(cells.values(), columns=CELL_COLS), paths


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
    import matplotlib.pyplot as plt
    import seaborn as sns

    cells, paths = load_cells(b)
    how = "`python -m ate_bench validate` (nox -s validate)"
    if len(cells):
        status = MEASURED
        cells = cells.sort_values(["task", "framework", "profile", "case"])
        summary = (
            cells.groupby(["task", "framework", "profile"])["outcome"]
            .value_counts()
            .unstack(fill_value=0)
            .reindex(columns=["as expected", "UNEXPECTED", NOT_RUN], fill_value=0)
            .reset_index()
        )
        runs = cells[cells["outcome"] == NOT_RUN]
        summary["not_run_reasons"] = [
            "; ".join(sorted(set(runs[(runs["task"] == r.task) & (runs["framework"] == r.framework)]["reasons"])))[:300]
            for r in summary.itertuples()
        ]
        shown = cells.assign(
            shown=cells["verdict"].where(cells["outcome"] != "UNEXPECTED", cells["verdict"] + " (UNEXPECTED)")
        )
        matrix = shown.pivot_table(
            index=["task", "framework", "profile"], columns="case", values="shown", aggfunc="first"
        ).reset_index()
        matrix.columns.name = None
        notes = [f"{len(cells)} cells: " + ", ".join(f"{k} {v}" for k, v in cells["outcome"].value_counts().items())]
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

    codes = {"as expected": 0, "UNEXPECTED": 1, NOT_RUN: 2}
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.18 * max(1, len(matrix)))))
    if status == MEASURED:
        grid = cells.assign(
            code=cells["outcome"].map(codes), row=cells["task"] + " " + cells["framework"] + " " + cells["profile"]
        )
        heat = grid.pivot_table(index="row", columns="case", values="code", aggfunc="max")
        sns.heatmap(
            heat,
            cmap=["#55a868", "#c44e52", "#bbbbbb"],
            vmin=-0.5,
            vmax=2.5,
            cbar=False,
            linewidths=0.5,
            yticklabels=True,
            ax=ax,
        )
        ax.set_title("green: as expected, red: UNEXPECTED, grey: not run (reason in validation_cells.csv)", fontsize=8)
        ax.tick_params(labelsize=6)
        ax.set_ylabel("")
    else:
        ax.text(0.5, 0.5, status, ha="center", va="center", wrap=True, fontsize=9)
        ax.set_axis_off()
    b.figure("validation_matrix", fig, paths, status, "Checker validation matrix figure", notes)

    costs, cost_paths = load_costs(b.results)
    if len(costs):
        cstatus = MEASURED
    else:
        cstatus = f"{NOT_MEASURED}: no cost record; run `python -m ate_bench cost`"
        costs = costs.reindex([0]).assign(task="(none)", framework="", cost_source=cstatus)
    b.table(
        "agent_free_cost",
        costs,
        cost_paths,
        cstatus,
        "Agent-free cost per Q&A task and framework (a reproducible floor under the agent's exploration)",
        [
            "lines/bytes of the files the key's facts name; files matching the key term out of all source files; "
            "the most import hops from the training entry point to a cited file"
        ],  # fmt: skip
    )
    fig, ax = plt.subplots(figsize=(8, 3.2))
    if cstatus == MEASURED:
        sns.barplot(data=costs, x="task", y="cited_lines", hue="framework", ax=ax)
        ax.set_yscale("log")
        ax.set_ylabel("lines of the files to cite (log)")
        ax.tick_params(axis="x", rotation=40, labelsize=7)
    else:
        ax.text(0.5, 0.5, cstatus, ha="center", va="center", fontsize=9)
        ax.set_axis_off()
    b.figure("agent_free_cost", fig, cost_paths, cstatus, "Agent-free cost figure: lines an answer must cite from")
