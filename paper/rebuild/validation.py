"""Result 6: the checker validation matrix (task x framework x profile x case -> verdict) from
`results/ate/validation/*.json` and the operate tasks' gpu1 records in `results/ate/gpu1/`, and the agent-free costs
from `results/ate/cost/*.json`.

Several validate calls may cover different tasks; each cell is taken from the newest record that holds it and
ran it (a newer "not run" never hides a verdict). A "not run" cell keeps its reason and is never counted as
passed. A cell (or cost row) whose task folder, or pithtrain's code for a pithtrain workspace, changed since
the record's commit is marked stale naming that commit (column `fresh`); `make reproduce` re-measures them.
"""

import json
import subprocess
import tomllib

import pandas as pd

from ate_bench.validate import near_miss_elsewhere
from paper.rebuild.ate import load_costs
from paper.rebuild.ate_records import load_tasks
from paper.rebuild.common import (
    FRAMEWORKS,
    MEASURED,
    NOT_MEASURED,
    REPO,
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


def freshness(commit: str, task: str, framework: str, paths: dict[str, str], case: str = "") -> str:
    """ "" or why a cell (or, with no `case`, a cost row) made at `commit` is stale: its task changed since (but for
    another framework's gold, near misses and provided files: a folder named after it, and for a cell, the other
    near misses of its own framework: wrong/<framework>/ but its case's file), or pithtrain's code for a pithtrain
    workspace (the other frameworks are pinned in the task)."""
    folder = paths.get(task, "tasks")
    others = tuple(  # the folder's files, and the folder itself where it is a link (prepare/<profile>/<framework>)
        f":(exclude,glob){folder}/**/{other}{tail}"
        for other in FRAMEWORKS
        if other != framework
        for tail in ("/**", "")
    )
    own_wrong = f"{folder}/wrong/{framework}"
    if case:  # a gold or a noop is not made stale by a near miss, nor one near miss by another
        others += (f":(exclude,glob){own_wrong}/**",)
    watched = (folder, "pithtrain") if framework == "pithtrain" else (folder,)
    toml = f":(exclude){folder}/task.toml"
    why = stale_since(commit or "", watched + others + (toml,))
    if why or task not in paths or (case and (why := stale_since(commit or "", (f"{own_wrong}/{case}",)))):
        return why
    return (
        ""
        if own_task_toml(commit, folder, framework) == own_task_toml("HEAD", folder, framework)
        else (f"stale: {folder}/task.toml changed since {commit[:7]}")
    )


def own_task_toml(commit: str, folder: str, framework: str) -> dict | None:
    """task.toml at `commit` less the other frameworks' [unrunnable] cells (their reasons are not this cell's task);
    None where it cannot be read."""
    shown = subprocess.run(["git", "show", f"{commit}:{folder}/task.toml"], cwd=REPO, capture_output=True, text=True)
    if shown.returncode:
        return None
    spec = tomllib.loads(shown.stdout)
    spec["unrunnable"] = {k: v for k, v in spec.get("unrunnable", {}).items() if k.split("/")[0] == framework}
    return spec


def source_commit(rec: dict) -> str:
    """The commit a record's tree came from: a GPU call's tree travels without .git and is committed there anew, so
    its `commit` is in no history here; `travelled_commit` names the commit it was copied from (gpu1_golds.sh)."""
    return rec.get("travelled_commit") or rec.get("commit") or ""


def operate_gpu1_records(b: Build) -> list:
    """The operate tasks' gpu1 records of tasks/operate/gpu1_golds.sh (results/ate/gpu1/): each cell renamed to its
    task id and given its kind, as validate's records have them."""
    ids = {t.slug: t.task for t in load_tasks(b.tasks).itertuples() if t.category == "operate"}
    found = []
    for path in sorted((b.results / "ate" / "gpu1").glob("*.json")):
        rec = json.loads(path.read_text())
        if rec.get("schema") == "operate-gpu1-golds-1":
            rec["cells"] = [c | {"task": ids.get(c["task"], c["task"]), "kind": c["case"]} for c in rec["cells"]]
            found.append((path, rec))
    return found


def whole_rows(records: list) -> dict[tuple, tuple[str, set]]:
    """(task, framework, profile) -> (record name, its cases) of the newest complete record that ran the row whole
    (no --cases): the cases the row had then. An older cell of a case not among them is of a case since gone."""
    rows: dict[tuple, tuple[str, set]] = {}
    for path, rec in records:  # oldest first
        if not rec.get("complete") or "--cases" in json.dumps(rec.get("command", "")):
            continue
        ran: dict[tuple, set] = {}
        for c in rec["cells"]:
            ran.setdefault((c["task"], c["framework"], c["profile"]), set()).add(c["case"])
        rows |= {row: (path.name, cases) for row, cases in ran.items()}
    return rows


def load_cells(b: Build) -> tuple[pd.DataFrame, list, int]:
    """Each cell from the newest record that holds it and ran it: a newer "not run" never hides a verdict. A wrong
    .sh that is now a near miss only on other profiles is "not run" on this one, whatever an older record says (as
    `validate` records it today). A case since gone is left out (counted: the third value): a wrong answer removed
    from wrong/, or one that a newer whole run of its row no longer has (a blind answer renamed by its adjudication).
    validate's records, and the operate tasks' gpu1 records, newest last by name."""
    cells, paths, tasks, removed = {}, [], task_paths(b), set()
    validated = [(path, json.loads(path.read_text())) for path in (b.results / "ate" / "validation").glob("*.json")]
    records = sorted(validated + operate_gpu1_records(b), key=lambda pair: pair[0].name)
    whole = whole_rows(records)
    for path, rec in records:
        paths.append(path)
        for c in rec["cells"]:
            key = (c["task"], c["framework"], c["profile"], c["case"])
            script = REPO / tasks.get(c["task"], "tasks") / "wrong" / c["framework"] / c["case"]
            newer, cases = whole.get(key[:3], ("", set()))
            if (c.get("kind") in ("wrong-sh", "wrong-md") and script.parent.is_dir() and not script.is_file()) or (
                path.name < newer and c["case"] not in cases
            ):
                removed.add(key)
                continue
            elsewhere = c.get("kind") == "wrong-sh" and script.is_file() and near_miss_elsewhere(script, c["profile"])
            if elsewhere:
                c = c | {"verdict": NOT_RUN, "reasons": [elsewhere]}
            if c["verdict"] == NOT_RUN and key in cells and cells[key]["verdict"] != NOT_RUN:
                continue
            # "not run" by HEAD's header is as fresh as HEAD, whatever the record's age
            stale = "" if elsewhere else freshness(source_commit(rec), c["task"], c["framework"], tasks, c["case"])
            cells[key] = c | {
                "outcome": outcome(c["expected"], c["verdict"]),
                "reasons": "; ".join(one_line(r) for r in c["reasons"]),
                "record": path.name,
                "fresh": stale or "yes",
            }
    return pd.DataFrame(cells.values(), columns=CELL_COLS), paths, len(removed)


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
    of = [
        (cells["task"] == r.task) & (cells["framework"] == r.framework) & (cells["profile"] == r.profile)
        for r in summary.itertuples()
    ]
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


CITED = "wrong + right citations"
ROLES = {"blind-correct": "correct", "blind-wrong": "wrong", "blind-cited": CITED}


def case_group(kind: str, case: str) -> str:
    """The figure's column for a case (the tables keep every case): gold, noop, a generated case, the hand-written
    wrong answers, a feature task's blind near-miss set (`blind-*` is set 1, `blindN-*` set N), a Q&A blind set's
    correct, wrong or wrong-with-citations answers."""
    if kind in ROLES:
        return f"{case.split('/')[0]} {ROLES[kind]}"
    if kind in ("wrong-md", "wrong-sh"):
        return f"near misses {case[5:].split('-')[0] or '1'}" if case.startswith("blind") else "hand-written wrong"
    return case


def _group_order(group: str) -> tuple:
    fixed = ["gold", "noop", "other-task", "shifted", "stripped", "hand-written wrong"]
    if group in fixed:
        return (0, fixed.index(group))
    name, _, role = group.partition(" ")
    number = int("".join(ch for ch in name + role if ch.isdigit()) or 0)
    return (1, number, 0) if group.startswith("near misses") else (2, number, ["correct", "wrong", CITED].index(role))


def matrix_figure(b: Build, cells: pd.DataFrame, paths, status: str, notes) -> None:
    import matplotlib.pyplot as plt
    import seaborn as sns

    codes = {"as expected": 0, "UNEXPECTED": 1, NOT_RUN: 2}
    rows = cells[["task", "framework", "profile"]].drop_duplicates()
    fig, ax = plt.subplots(figsize=(16, max(2.5, 0.2 * max(1, len(rows)))))
    if status == MEASURED:
        row = cells["task"] + " " + cells["framework"] + " " + cells["profile"]
        stale = cells["fresh"].ne("yes").groupby(row).any()
        mark = {r: " (stale)" if any_stale else "" for r, any_stale in stale.items()}
        grid = cells.assign(code=cells["outcome"].map(codes), row=row + row.map(mark),
                            group=[case_group(k, c) for k, c in zip(cells["kind"], cells["case"])])  # fmt: skip
        grid["unexpected"] = grid["outcome"].eq("UNEXPECTED")
        cols = sorted(grid["group"].unique(), key=_group_order)
        agg = grid.groupby(["row", "group"]).agg(code=("code", "max"), n=("code", "size"), bad=("unexpected", "sum"))
        heat = agg["code"].unstack().reindex(columns=cols)
        label = agg.apply(lambda a: f"{a.bad}/{a.n}" if a.bad else str(a.n), axis=1).unstack()
        label = label.reindex(index=heat.index, columns=cols).fillna("")
        sns.heatmap(heat, cmap=["#55a868", "#c44e52", "#bbbbbb"], vmin=-0.5, vmax=2.5, cbar=False, linewidths=0.5,
                    annot=label, fmt="", annot_kws={"fontsize": 5}, yticklabels=True, ax=ax)  # fmt: skip
        title = "each cell: a group of cases of one row, with its number of cases; green: all as expected, red: "
        title += "UNEXPECTED (how many / of how many; known misses included),\ngrey: not run (reason in "
        title += "validation_cells.csv, which has every case); (stale): a case of the row was made before its task "
        ax.set_title(title + "or pithtrain changed", fontsize=8)
        ax.tick_params(labelsize=6)
        ax.set_ylabel("")
        ax.set_xlabel("case group")
    else:
        nothing_measured(ax, status)
    b.figure("validation_matrix", fig, paths, status, "Checker validation matrix figure", notes)
    plt.close(fig)


BLIND_COLS = ["record", "keys_commit", "set", "framework", "role", "correct PASS", "wrong FAIL",
              "wrong + right citations FAIL"]  # fmt: skip


def _rate(ok: int, n: int) -> str:
    return f"{ok}/{n} ({100 * ok / n:.0f}%)" if n else "none"


def blind_rates(b: Build) -> tuple[pd.DataFrame, list]:
    """Every validation record's `summary.blind`: a set's rates at the keys of that record's commit. A set measured
    at keys that were later revised on it stays in the table as it was first measured (the honest measure)."""
    rows, paths, seen = [], [], set()
    for path in sorted((b.results / "ate" / "validation").glob("*.json")):
        rec = json.loads(path.read_text())
        blind = rec.get("summary", {}).get("blind") or {}
        if blind:
            paths.append(path)
        for set_name, per_fw in sorted(blind.items()):
            for fw, r in sorted(per_fw.items()):
                role = "first measured here" if (set_name, fw) not in seen else "again, at later keys"
                seen.add((set_name, fw))
                rows.append({"record": path.name, "keys_commit": str(rec.get("commit", ""))[:7], "set": set_name,
                             "framework": fw, "role": role, "correct PASS": _rate(r["correct_pass"], r["correct"]),
                             "wrong FAIL": _rate(r["wrong_fail"], r["wrong"]),
                             "wrong + right citations FAIL": _rate(r["cited_fail"], r["cited"])})  # fmt: skip
    return pd.DataFrame(rows, columns=BLIND_COLS), paths


def blind_figure(b: Build, rates: pd.DataFrame, paths: list, status: str) -> None:
    """Lines: one panel per kind of answer, each set where first measured on the x axis, one line per framework."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    first = rates[rates["role"] == "first measured here"] if len(rates) else rates
    whats = BLIND_COLS[5:]
    fig, axes = plt.subplots(1, len(whats), figsize=(11, 3.2), sharey=True)
    if len(first):
        long = first.melt(id_vars=["set", "framework"], value_vars=whats, var_name="what", value_name="rate")
        long = long[long["rate"] != "none"]
        long["percent"] = long["rate"].str.extract(r"\((\d+)%\)")[0].astype(float)
        long["set number"] = long["set"].str.extract(r"(\d+)$")[0].astype(int)
        for ax, what in zip(axes, whats, strict=True):
            part = long[long["what"] == what]
            sns.lineplot(
                data=part, x="set number", y="percent", hue="framework", marker="o", ax=ax, legend=ax is axes[0]
            )
            ax.axhline(95 if what == "correct PASS" else 100, color="grey", lw=0.8, ls="--")
            ax.set_title(what, fontsize=9)
            numbers = sorted(part["set number"].unique())
            ax.set_xticks(numbers, [str(n) if n % 2 or len(numbers) < 12 else "" for n in numbers], fontsize=7)
            ax.set_ylim(min(70, long["percent"].min() - 5), 102)  # every point stays in view
        axes[0].set_ylabel("% judged as expected")
        axes[0].legend(fontsize=7, loc="lower right")
        fig.suptitle("Q&A keys on answers written blind: each set where first measured (set N measures freeze N-1; "
                     "set 1 was revised on); dashed: the goal", fontsize=8)  # fmt: skip
        fig_status = status
    else:
        fig_status = status if status != MEASURED else f"{NOT_MEASURED}: no blind-answer cell in the records"
        nothing_measured(axes[0], fig_status)
    fig.tight_layout()
    b.figure("validation_blind", fig, paths, fig_status, "Q&A checkers on blind answers: rates per set and framework")
    plt.close(fig)


def build(b: Build) -> None:
    cells, paths, removed = load_cells(b)
    how = "`python -m ate_bench validate` (nox -s validate)"
    if len(cells):
        status = MEASURED
        cells = cells.sort_values(["task", "framework", "profile", "case"])
        summary, matrix, notes = summarise(cells)
        if removed:
            notes.append(
                f"{removed} cells of cases since gone (removed from wrong/, or renamed by an adjudication) are left out"
            )
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
    rates, blind_paths = blind_rates(b)
    blind_status = MEASURED if len(rates) else f"{NOT_MEASURED}: no validation record with blind-answer cells"
    table = rates if len(rates) else pd.DataFrame([{"set": "(none)", "framework": blind_status}], columns=BLIND_COLS)
    b.table(
        "validation_blind",
        table,
        blind_paths,
        blind_status,
        "Q&A checkers on answers written blind to the keys: correct PASS and wrong FAIL per set, framework and keys",
        [
            "set N was written blind after freeze N-1 and read only after it, measured, then revised on (freeze N; "
            "set1 had no freeze before it, set6 was not revised on): each set's honest measure is its 'first "
            "measured here' row; the last, set6 at freeze 5, is short of 95% correct / 100% wrong (tasks/qa/README.md)"
        ],
    )
    blind_figure(b, rates, blind_paths, blind_status)


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
