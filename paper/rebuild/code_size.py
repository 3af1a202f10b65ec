"""Result 1, code size and the four principles, from the latest `results/code_size/*.json`.

The record is written by `paper/measure_code_size.py`, which says what is counted and how. Python-native
here means measured: no C, C++ or CUDA source in the tree (custom kernels, if any, in Python/Triton).
`pithtrain` here is this repository's trainer, a different code base from the authors' PithTrain that the
paper counts: `measured_over_paper` for it sets two code bases side by side, not a measurement of theirs.
"""

import json

import pandas as pd

from paper.rebuild.common import MEASURED, NOT_MEASURED, PAPERS, Build, framework_colour, latest

ORDER = ("pithtrain", "torchtitan", "megatron-lm", "deepspeed")
COLUMNS = [
    "framework", "version", "package", "python_lines", "python_lines_without_experiments", "python_files",
    "cpp_cuda_lines", "python_native", "registry_lines", "runtime_spec_lines", "string_import_lines", "skills",
    "agents_md", "paper_python_lines", "measured_over_paper", "counted",
]  # fmt: skip
HOW = "`python paper/measure_code_size.py` (downloads the pinned sdists once)"


def framework_row(r: dict, paper: dict) -> dict:
    src, subs = r["source"], r["python_lines_by_subpackage"]
    counted = f"{r['package']}/*.py of {src['version'] if src['mode'] != 'repo' else 'this repository at HEAD'}"
    counted += "".join(f"; {src[k]}" for k in ("lacks",) if k in src)
    if src["mode"] == "repo":
        counted += "; our trainer, not the authors' (their count is paper_python_lines)"
    return {
        "framework": r["framework"],
        "version": src["version"] if src["mode"] != "repo" else f"HEAD {src['version'][:10]}",
        "package": r["package"] + "/",
        "python_lines": r["python_lines"],
        "python_lines_without_experiments": r["python_lines"] - subs.get("experiments", 0),
        "python_files": r["python_files"],
        "cpp_cuda_lines": r["cpp_cuda_lines"],
        "python_native": "yes" if r["cpp_cuda_files"] == 0 else f"no ({r['cpp_cuda_files']} C++/CUDA files)",
        "registry_lines": r["patterns"]["registry"],
        "runtime_spec_lines": r["patterns"]["runtime_spec"],
        "string_import_lines": r["patterns"]["string_import"],
        "skills": r["skills"],
        "agents_md": "yes" if r["agents_md"] else "no",
        "paper_python_lines": paper["lines"].get(r["framework"]),
        "measured_over_paper": r["python_lines"] / paper["lines"][r["framework"]],
        "counted": counted,
    }


def record_tables(rec: dict, paper: dict) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    rows = [framework_row(r, paper) for r in rec["frameworks"]]
    sub = [
        {"framework": r["framework"], "subpackage": k, "python_lines": v}
        for r in rec["frameworks"]
        for k, v in r["python_lines_by_subpackage"].items()
    ]
    notes = [f"pattern `{k}`: `{v}`" for k, v in rec["patterns"].items()]
    notes.append(f"measured by `{rec['command']}` at {rec['git_commit'][:10]} on {rec['date']}")
    notes.append("column counted: what each count includes; python_lines_without_experiments leaves out the "
                 "package's experiments/ folder (TorchTitan's holds experimental models and trainers)")  # fmt: skip
    notes.append("pithtrain: this repository's trainer against the authors' count: two different code bases")
    return pd.DataFrame(rows)[COLUMNS], pd.DataFrame(sub), notes


def figure(b: Build, table: pd.DataFrame, paper: dict, inputs, status: str, notes) -> None:
    """One colour per framework: the paper's count hatched, ours solid (and without experiments/ where that
    differs), C++/CUDA dotted; each bar with its value."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    kinds = [("Python, the paper's count", "//", 0.45), ("Python, measured here", "", 1.0),
             ("Python here, without experiments/", "xx", 0.7), ("C++/CUDA, measured here", "..", 0.7)]  # fmt: skip
    measured = table.set_index("framework") if status == MEASURED else pd.DataFrame()
    fig, ax = plt.subplots(figsize=(9, 4))
    for x, fw in enumerate(ORDER):
        m = measured.loc[fw] if fw in measured.index else None
        values = [paper["lines"][fw]] + ([None] * 3 if m is None else [m.python_lines, None, m.cpp_cuda_lines or None])
        if m is not None and m.python_lines_without_experiments != m.python_lines:
            values[2] = m.python_lines_without_experiments
        for k, ((_, hatch, alpha), v) in enumerate(zip(kinds, values)):
            if v:
                bar = ax.bar(x + (k - 1.5) * 0.2, v, 0.2, color=framework_colour(fw), alpha=alpha, hatch=hatch,
                             edgecolor="#333333", linewidth=0.4)  # fmt: skip
                ax.bar_label(bar, labels=[f"{v / 1000:.1f}K"], fontsize=6, padding=1)
    names = {"pithtrain": "pithtrain\n(ours: this repo;\npaper: the authors')"}
    ax.set_xticks(range(len(ORDER)), [names.get(f, f) for f in ORDER], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("lines (log scale)")
    legend = [Patch(facecolor="#999999", alpha=a, hatch=h, edgecolor="#333333", label=n) for n, h, a in kinds]
    ax.legend(handles=legend, fontsize=7, loc="upper left", frameon=False)
    ax.set_ylim(top=ax.get_ylim()[1] * 4)
    ax.set_title("Code size" if status == MEASURED else f"Code size: {status}", fontsize=9)
    fig.tight_layout()
    b.figure("code_size", fig, inputs, status, "Code size figure (log scale), the paper's counts beside", notes)
    plt.close(fig)


def build(b: Build) -> None:
    paper = b.paper["code_size"]
    rec_path = latest(b.results / "code_size", "*.json")
    notes = [f"{PAPERS}: paper_python_lines ({paper['source']})"]
    if rec_path is None:
        status = f"{NOT_MEASURED}: no code-size record; run {HOW}"
        table = pd.DataFrame([{"framework": f, "paper_python_lines": paper["lines"][f]} for f in ORDER])
        table = table.reindex(columns=COLUMNS).astype(object).fillna({"python_lines": status})
        sub = pd.DataFrame(columns=["framework", "subpackage", "python_lines"])
        inputs = []
    else:
        table, sub, more = record_tables(json.loads(rec_path.read_text()), paper)
        status, inputs, notes = MEASURED, [rec_path], notes + more
    stands = "Code size and the four principles (Python lines of the main package, C++/CUDA apart)"
    b.table("code_size", table, inputs, status, stands, notes)
    b.table("code_size_by_subpackage", sub, inputs, status, "Python lines per subpackage of each main package")
    figure(b, table, paper, inputs, status, notes)
