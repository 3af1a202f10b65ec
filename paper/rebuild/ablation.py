"""Result 4, the skills ablation: turns, output tokens and active GPU time with skills kept and stripped
(`python -m ate_bench run ... --no-skills`), per task, framework and agent configuration.

Each arm is the median over its repeats; the reduction is 1 - with/without of the medians, and its spread
is the range from the arms' extremes (1 - max(with)/min(without) .. 1 - min(with)/max(without)).
"""

import pandas as pd

from paper.rebuild.ate_records import GROUP, NO_KEY, load_runs
from paper.rebuild.common import MEASURED, PAPERS, Build, fit_labels, framework_colour, nothing_measured

METRICS = ("turns", "output_tokens", "gpu_min")
KEY = [c for c in GROUP if c != "skills"]


def reductions(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for key, g in runs.groupby(KEY, dropna=False):
        on, off = g[g["skills"] == "kept"], g[g["skills"] == "stripped"]
        if not len(on) or not len(off):
            continue
        row = dict(zip(KEY, key)) | {"runs_with": len(on), "runs_without": len(off)}
        for m in METRICS:
            a, z = on[m].dropna(), off[m].dropna()
            row[f"{m}_with"], row[f"{m}_without"] = a.median(), z.median()
            ok = len(a) and len(z) and z.min() > 0
            row[f"{m}_reduction"] = 1 - a.median() / z.median() if ok else None
            row[f"{m}_reduction_range"] = f"{1 - a.max() / z.min():.2f}..{1 - a.min() / z.max():.2f}" if ok else ""
        rows.append(row)
    cols = [*KEY, "runs_with", "runs_without"]
    cols += [f"{m}_{s}" for m in METRICS for s in ("with", "without", "reduction", "reduction_range")]
    return pd.DataFrame(rows, columns=cols)


def build(b: Build) -> None:
    import matplotlib.pyplot as plt
    import seaborn as sns

    runs, paths = load_runs(b.results, b.run_kind)
    table = reductions(runs)
    paper = b.paper["ablation"]
    notes = [f"{PAPERS} ({paper['source']}): {paper['claim']}"]
    if len(table):
        status = MEASURED
        inputs = [p for p in paths if p.parent.name.startswith(tuple(table["task"]))]
    else:
        status = f"{NO_KEY}: `nox -s ablation -- --agent claude-code` runs both arms"
        table = pd.DataFrame([{"task": "(none)", "turns_reduction": status}]).reindex(columns=table.columns)
        inputs = []
    b.table("skills_ablation", table, inputs, status, "Skills ablation: with and without skills", notes)

    fig, ax = plt.subplots(figsize=(7, 3.2))
    if status == MEASURED:
        long = runs[runs["task"].isin(table["task"])].melt(
            id_vars=["task", "framework", "skills"], value_vars=["turns"], value_name="turns_value"
        )
        # pithtrain's colour (the ablation runs pithtrain), pale for the arm without skills
        arms = {"kept": framework_colour("pithtrain"), "stripped": "#f2c4a4"}
        sns.barplot(data=long, x="task", y="turns_value", hue="skills", estimator="median", errorbar=("pi", 100),
                    palette=arms, hue_order=list(arms), ax=ax)  # fmt: skip
        for bars in ax.containers:  # inside the bar: the whiskers stand on its top
            ax.bar_label(bars, fmt="%.0f", label_type="center", fontsize=7)
        ax.set_ylabel("agent turns (median; whiskers: min-max)")
        ax.set_xlabel("")
        fit_labels(ax, 14)
        ax.legend(title="skills", fontsize=7, title_fontsize=7)
    else:
        nothing_measured(ax, f"{status}. {PAPERS}: {paper['claim']}")
    b.figure(
        "skills_ablation", fig, inputs, status, "Skills ablation figure: agent turns with and without skills", notes
    )
    plt.close("all")
