"""Compare a rebuild's outputs with the committed reference, output by output.

    python -m paper.compare [--reference paper/outputs] [--new build/paper/outputs] [--write FILE]

The committed `paper/outputs/` is the reference (what the paper's tables and figures show); `make kick-tires`,
`make reproduce` and `nox -s figures` rebuild into `build/paper/` and end with this comparison. Per table:
"same" (every compared cell equal), "within tolerance" (numbers off by no more than the tolerance stated for
that result below), "same, plus new measurements" (a table with a row per measurement that keeps every
reference row and adds some) or "differs", with the cells that differ (reference -> new). Columns that name where or
when an output was made (commit, call, record, date, freshness) are not compared. A figure is "same records"
when its sidecar names the same input files with the same sha256, else "other records" (its table says how
the numbers moved). An output present on one side only is said so.
"""

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
# Where or when, not what: never compared.
NOT_COMPARED = {"commit", "call_id", "date", "git_commit", "record", "fresh", "built_at", "cost_commit", "cost_source"}
NOT_COMPARED |= {"seconds", "stale", "hardware", "records", "version"}  # version: pithtrain's is "HEAD <commit>"
# table -> (the columns naming a row, relative tolerance on numbers, the tolerance in words). Tables not named
# here are compared cell by cell, rows in file order, and must be the same.
TOLERANCE = {
    "throughput": (
        ["config", "mesh", "routing", "framework"],
        0.05,
        "numbers within 5%: two fair calls of qwen3-30b-a3b-8l on one H200 gave 68.8k and 69.0k tokens/s; GPUs vary",
    ),
    "validation_cells": (["task", "framework", "profile", "case"], 0.0, "exact"),
    "validation_summary": (["task", "framework", "profile"], 0.0, "exact"),
    "validation_matrix": (["task", "framework", "profile"], 0.0, "exact"),
    "agent_free_cost": (["task", "framework"], 0.0, "exact"),
    "gold_cost": (["task", "framework"], 0.0, "exact"),
    "ate_qa": (["task", "framework"], 0.0, "exact"),
    "ate_operate": (["task", "framework"], 0.0, "exact"),
    "ate_feature": (["task", "framework"], 0.0, "exact"),
    "code_size": (["framework"], 0.0, "exact"),
    "code_size_by_subpackage": (["framework", "subpackage"], 0.0, "exact"),
    "throughput_smoke": (
        ["config", "framework"],
        math.inf,
        "status compared; CPU tokens/s and memory not (they measure the machine, not the code)",
    ),
}
# Tables with a row per measurement, where a rebuild after new validation runs adds rows (a blind set measured again):
# every reference row kept as it was, plus new ones, is its own verdict, not "differs".
APPENDS_MEASUREMENTS = {"validation_blind"}


def read(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    return df.drop(columns=[c for c in df.columns if c in NOT_COMPARED])


def close(a: str, b: str, tol: float) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return abs(x - y) <= tol * max(abs(x), abs(y))


def cut(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:57] + "...")


def appended_rows(ref: pd.DataFrame, new: pd.DataFrame) -> list[str] | None:
    """The rows `new` adds where it keeps every row of `ref` as it was (in any order), else None."""
    left = Counter(map(tuple, new.values))
    left.subtract(Counter(map(tuple, ref.values)))
    if any(n < 0 for n in left.values()):
        return None
    return [cut(", ".join(row)) for row, n in left.items() for _ in range(n)]


def compare_table(ref: pd.DataFrame, new: pd.DataFrame, name: str) -> tuple[str, str]:
    """(verdict, detail) for one table."""
    keys, tol, words = TOLERANCE.get(name, (None, 0.0, "exact"))
    if list(ref.columns) != list(new.columns):
        gone, added = set(ref.columns) - set(new.columns), set(new.columns) - set(ref.columns)
        return "differs", f"columns: {sorted(gone)} gone, {sorted(added)} new"
    if keys:  # rows matched by what they stand for, in one order on both sides
        keys = [k for k in keys if k in ref.columns]
        ref, new = ref.set_index(keys).sort_index(), new.set_index(keys).sort_index()
        if list(ref.index) != list(new.index):
            gone, added = set(ref.index) - set(new.index), set(new.index) - set(ref.index)
            return "differs", f"rows: {len(gone)} gone {sorted(gone)[:2]}, {len(added)} new {sorted(added)[:2]}"
    elif ref.shape != new.shape:
        if name in APPENDS_MEASUREMENTS and (added := appended_rows(ref, new)) is not None:
            return "same, plus new measurements", f"{len(added)} row(s) added: " + "; ".join(added[:3])
        return "differs", f"{len(ref)} rows in the reference, {len(new)} here"
    exact, loose = [], []
    for (row, a), (_, b) in zip(ref.iterrows(), new.iterrows()):
        for col in ref.columns:
            if a[col] != b[col]:
                (loose if close(a[col], b[col], tol) else exact).append(f"{row} {col}: {cut(a[col])} -> {cut(b[col])}")
    if exact:
        return "differs", f"{len(exact)} cells: " + "; ".join(exact[:3])
    if loose:
        return f"within tolerance ({words})", f"{len(loose)} cells: " + "; ".join(loose[:2])
    return "same", "" if name not in TOLERANCE else f"({words})"


def input_files(sidecar: Path) -> set[tuple[str, str]]:
    return {(Path(i["path"]).name, i["sha256"]) for i in json.loads(sidecar.read_text())["inputs"]}


def compare(reference: Path, new: Path) -> list[tuple[str, str, str]]:
    rows = []
    names = sorted(
        {p.name.removesuffix(".provenance.json") for d in (reference, new) for p in d.glob("*.provenance.json")}
    )
    for name in names:
        ref_side, new_side = reference / f"{name}.provenance.json", new / f"{name}.provenance.json"
        if not ref_side.exists() or not new_side.exists():
            rows.append((name, "differs", "only in " + ("this build" if new_side.exists() else "the reference")))
        elif name.startswith("fig_"):
            a, b = input_files(ref_side), input_files(new_side)
            rows.append((name, "same records" if a == b else "other records", "" if a == b else "its table compares"))
        else:
            rows.append((name, *compare_table(read(reference / f"{name}.csv"), read(new / f"{name}.csv"), name)))
    return rows


def shown(path: Path) -> str:
    path = path.resolve()
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)


def markdown(rows, reference: Path, new: Path) -> str:
    lines = [
        f"# `{shown(new)}` against the reference `{shown(reference)}`",
        "",
        "| output | verdict | detail |",
        "|---|---|---|",
    ]
    lines += [f"| {n} | {v} | {d.replace('|', '/')} |" for n, v, d in rows]
    counts = pd.Series([v.split(" (")[0] for _, v, _ in rows]).value_counts()
    return "\n".join(lines + ["", "Outputs: " + ", ".join(f"{k} {n}" for k, n in counts.items()) + "."]) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m paper.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", type=Path, default=REPO / "paper" / "outputs", help="default: paper/outputs")
    p.add_argument(
        "--new", type=Path, default=REPO / "build" / "paper" / "outputs", help="default: build/paper/outputs"
    )
    p.add_argument("--write", type=Path, help="also write the table there (Markdown)")
    args = p.parse_args(argv)
    for flag, d in (("--reference", args.reference), ("--new", args.new)):
        if not any(d.glob("*.provenance.json")):
            print(f"{flag} {d}: no outputs there; give a folder `python -m paper.rebuild` wrote", file=sys.stderr)
            return 2
    text = markdown(compare(args.reference, args.new), args.reference, args.new)
    print(text, end="")
    if args.write:
        args.write.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
