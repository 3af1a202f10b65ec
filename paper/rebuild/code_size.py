"""Result 1, code size and the four principles, from the latest `results/code_size/*.json`.

The record is written by `paper/measure_code_size.py`, which says what is counted and how. Python-native
here means measured: no C, C++ or CUDA source in the tree (custom kernels, if any, in Python/Triton).
"""

import json

import pandas as pd

from paper.rebuild.common import MEASURED, NOT_MEASURED, PAPERS, Build, latest

ORDER = ("pithtrain", "torchtitan", "megatron-lm", "deepspeed")
COLUMNS = [
    "framework", "version", "package", "python_lines", "python_files", "cpp_cuda_lines", "python_native",
    "registry_lines", "runtime_spec_lines", "string_import_lines", "skills", "agents_md", "paper_python_lines",
    "measured_over_paper",
]  # fmt: skip
HOW = "`python paper/measure_code_size.py` (downloads the pinned sdists once)"


def build(b: Build) -> None:
    import matplotlib.pyplot as plt
    import seaborn as sns

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
        rec = json.loads(rec_path.read_text())
        rows, sub_rows = [], []
        for r in rec["frameworks"]:
            src = r["source"]
            rows.append(
                {
                    "framework": r["framework"],
                    "version": src["version"] if src["mode"] != "repo" else f"HEAD {src['version'][:10]}",
                    "package": r["package"] + "/",
                    "python_lines": r["python_lines"],
                    "python_files": r["python_files"],
                    "cpp_cuda_lines": r["cpp_cuda_lines"],
                    "python_native": "yes"
                    if r["cpp_cuda_files"] == 0
                    else f"no ({r['cpp_cuda_files']} C++/CUDA files)",
                    "registry_lines": r["patterns"]["registry"],
                    "runtime_spec_lines": r["patterns"]["runtime_spec"],
                    "string_import_lines": r["patterns"]["string_import"],
                    "skills": r["skills"],
                    "agents_md": "yes" if r["agents_md"] else "no",
                    "paper_python_lines": paper["lines"].get(r["framework"]),
                    "measured_over_paper": r["python_lines"] / paper["lines"][r["framework"]],
                }
            )
            sub_rows += [
                {"framework": r["framework"], "subpackage": k, "python_lines": v}
                for k, v in r["python_lines_by_subpackage"].items()
            ]
        table, sub = pd.DataFrame(rows)[COLUMNS], pd.DataFrame(sub_rows)
        status, inputs = MEASURED, [rec_path]
        notes += [f"pattern `{k}`: `{v}`" for k, v in rec["patterns"].items()]
        notes.append(f"measured by `{rec['command']}` at {rec['git_commit'][:10]} on {rec['date']}")
    stands = "Code size and the four principles (Python lines of the main package, C++/CUDA apart)"
    b.table("code_size", table, inputs, status, stands, notes)
    b.table("code_size_by_subpackage", sub, inputs, status, "Python lines per subpackage of each main package")

    long = [
        {"framework": f, "count": "Python, paper's count", "lines": paper["lines"][f]} for f in ORDER
    ]  # always shown, labelled
    if rec_path is not None:
        for r in table.itertuples():
            long.append({"framework": r.framework, "count": "Python, measured here", "lines": r.python_lines})
            if r.cpp_cuda_lines:
                long.append({"framework": r.framework, "count": "C++/CUDA, measured here", "lines": r.cpp_cuda_lines})
    fig, ax = plt.subplots(figsize=(7, 3.6))
    sns.barplot(data=pd.DataFrame(long), x="framework", y="lines", hue="count", order=list(ORDER), ax=ax)
    ax.set_yscale("log")
    ax.set_ylabel("lines (log scale)")
    ax.set_title("Code size" if rec_path else f"Code size: {status}", fontsize=9)
    ax.legend(fontsize=7)
    b.figure("code_size", fig, inputs, status, "Code size figure (log scale), the paper's counts beside", notes)
