"""What every result module shares: where records are, how an output and its provenance sidecar are written.

An output is a table (CSV + Markdown) or a figure (PNG + SVG). Beside each goes `<name>.provenance.json`:
the records it was built from (paths relative to the repository and sha256), the commit, the command and
its status. Every output is also an index entry, which `paper/README.md` lists.
"""

import functools
import hashlib
import json
import math
import re
import subprocess
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from ate_bench.runner import PIPELINE_CHECK, PIPELINE_CHECK_LABEL
from ate_bench.source_stamp import archive_commit, is_checkout

REPO = Path(__file__).resolve().parents[2]
PAPER_DATA = REPO / "paper" / "data" / "paper_reported.toml"
FRAMEWORKS = ("pithtrain", "torchtitan", "megatron-lm")
MEASURED = "measured here"
PAPERS = "the paper's numbers"
NOT_MEASURED = "not measured"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_commit() -> tuple[str, bool | None]:
    """HEAD and whether the tree differs from it outside results/ and paper/ (what the outputs are made of).
    From a source archive: the stamped commit, and None (no git to tell dirty)."""
    if not is_checkout(REPO):
        return archive_commit(REPO), None
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!results", ":!paper"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout
    return head or "unknown", bool(status.strip())


@functools.cache
def stale_since(commit: str, paths: tuple[str, ...]) -> str:
    """ "" when `paths` (relative to the repository) are at HEAD as they were at `commit`, the commit a record was
    made at; otherwise why an output built from that record is stale, naming the commit."""
    if not commit:
        return "stale: the record names no commit"
    if not is_checkout(REPO):
        return f"not checked (a source archive has no history to compare {commit[:7]} with)"
    if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO, capture_output=True).returncode:
        return f"stale: made at {commit[:7]}, a commit not in this history"
    diff = subprocess.run(
        ["git", "diff", "--name-only", commit, "HEAD", "--", *paths], cwd=REPO, capture_output=True, text=True
    ).stdout.split()
    named = ", ".join(p for p in paths if not p.startswith(":"))  # not the exclude pathspecs
    return f"stale: {len(diff)} file(s) of {named} changed since {commit[:7]}" if diff else ""


def one_line(text: str, limit: int = 0) -> str:
    """A table cell's form of a message: the first line, and where a traceback or a log follows, the last
    exception line (`...Error: ...`) after it; cut at `limit` characters when one is given. The full text stays
    in the record the row names."""
    pieces = [x.strip() for x in re.split(r"\n| \| ", str(text)) if x.strip()]
    errors = [x for x in pieces[1:] if re.search(r"\w(Error|Exception)\b:", x)]
    if errors:  # the message's own head (before its first colon), then the exception without a rank prefix
        error = re.sub(r"^\[rank\d+\]:\s*", "", errors[-1])
        line = error if pieces[0].startswith("Traceback") else pieces[0].split(": ")[0] + ": " + error
    else:
        line = pieces[0] if pieces else ""
    return line[: limit - 3] + "..." if limit and len(line) > limit else line


def load_paper() -> dict:
    return tomllib.loads(PAPER_DATA.read_text())


@dataclass
class Build:
    """One build: where records are read from, where outputs go, and the index of what was written."""

    results: Path
    tasks: Path
    out: Path
    command: str
    index: list[dict] = field(default_factory=list)
    run_kind: str = "agent"
    """Which ATE-Bench runs the agent results read: "agent", or PIPELINE_CHECK (a scripted model), whose
    outputs are named pipeline_check_<name> and labelled in their status, title and figure."""

    def __post_init__(self):
        self.commit, self.dirty = git_commit()
        self.paper = load_paper()

    def rel(self, path: Path) -> str:
        path = Path(path).resolve()
        return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)

    def _sidecar(self, name: str, files: list[Path], inputs: list[Path], status: str, stands_for: str, notes):
        inputs = sorted({Path(p).resolve() for p in inputs})
        if PAPER_DATA.resolve() not in inputs and any(PAPERS in s for s in [status, *notes]):
            inputs.append(PAPER_DATA.resolve())
        prov = {
            "output": name,
            "files": [f.name for f in files],
            "stands_for": stands_for,
            "status": status,
            "notes": list(notes),
            "inputs": [{"path": self.rel(p), "sha256": sha256(p)} for p in inputs],
            "commit": self.commit,
            "dirty": self.dirty,
            "command": self.command,
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        (self.out / f"{name}.provenance.json").write_text(json.dumps(prov, indent=2) + "\n")
        self.index.append({"name": name, "files": prov["files"], "stands_for": stands_for, "status": status})

    def _label(self, name: str, status: str, stands_for: str) -> tuple[str, str, str]:
        if self.run_kind == "agent":
            return name, status, stands_for
        assert self.run_kind == PIPELINE_CHECK, self.run_kind
        return f"pipeline_check_{name}", f"{PIPELINE_CHECK_LABEL} ({status})", f"{stands_for} [{PIPELINE_CHECK_LABEL}]"

    def table(self, name: str, df: pd.DataFrame, inputs, status: str, stands_for: str, notes=()) -> None:
        """`name.csv`, `name.md` (a title, the status, notes, the table) and the sidecar."""
        name, status, stands_for = self._label(name, status, stands_for)
        self.out.mkdir(parents=True, exist_ok=True)
        csv, md = self.out / f"{name}.csv", self.out / f"{name}.md"
        df.to_csv(csv, index=False)
        lines = [f"# {stands_for}", "", f"Status: {status}.", ""]
        lines += [f"- {n}" for n in notes] + ([""] if notes else [])
        lines += [markdown(df), "", f"Provenance: `{name}.provenance.json`.", ""]
        md.write_text("\n".join(lines))
        self._sidecar(name, [csv, md], inputs, status, stands_for, notes)

    def figure(self, name: str, fig, inputs, status: str, stands_for: str, notes=()) -> None:
        """`fig_<name>.png` and `.svg` and the sidecar."""
        import matplotlib.pyplot as plt

        name, status, stands_for = self._label(name, status, stands_for)
        if self.run_kind != "agent":
            fig.suptitle(PIPELINE_CHECK_LABEL, color="firebrick", fontsize=10)
        name = f"fig_{name}"
        plt.rcParams["svg.hashsalt"] = "pithtrain-paper"  # stable element ids: rebuilds diff only where data did
        self.out.mkdir(parents=True, exist_ok=True)
        files = [self.out / f"{name}.png", self.out / f"{name}.svg"]
        fig.savefig(files[0], dpi=150, bbox_inches="tight")
        # No date: the SVG stays byte-identical between rebuilds of the same records.
        fig.savefig(files[1], bbox_inches="tight", metadata={"Date": None})
        plt.close(fig)
        self._sidecar(name, files, inputs, status, stands_for, notes)


def markdown(df: pd.DataFrame) -> str:
    def cell(v) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        if isinstance(v, float):
            return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "|" + "|".join("---" for _ in df.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows])


def latest(directory: Path, pattern: str) -> Path | None:
    """The newest record by name (records are named by their UTC stamp)."""
    found = sorted(directory.glob(pattern)) if directory.is_dir() else []
    return found[-1] if found else None


# ---- shared figure styling: every figure gives a framework the same colour and fits its labels ----

# One colour per framework, whatever its variant (pithtrain-compiled, torchtitan-eager, megatron-core...).
FRAMEWORK_COLOURS = {"pithtrain": "#dd8452", "torchtitan": "#4c72b0", "megatron-lm": "#55a868", "deepspeed": "#8172b3"}


def framework_colour(name: str) -> str:
    """The colour of the framework `name` belongs to (a label such as `megatron-core` or `torchtitan-compiled`)."""
    if name.startswith("pithtrain"):
        return FRAMEWORK_COLOURS["pithtrain"]
    elif name.startswith("torchtitan"):
        return FRAMEWORK_COLOURS["torchtitan"]
    elif name.startswith("megatron"):
        return FRAMEWORK_COLOURS["megatron-lm"]
    elif name.startswith("deepspeed"):
        return FRAMEWORK_COLOURS["deepspeed"]
    raise ValueError(f"framework label {name!r}: no colour (expected pithtrain*, torchtitan*, megatron* or deepspeed*)")


def palette(names) -> dict[str, str]:
    """A seaborn palette for the hue values `names` (framework labels)."""
    return {n: framework_colour(n) for n in names}


def fit_labels(ax, width: int = 14, axis: str = "x") -> None:
    """Wrap the tick labels of `axis` at `width` characters, so they fit under their bar without rotation."""
    import textwrap

    ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    wrapped = [textwrap.fill(t.get_text(), width, break_long_words=False) for t in ticks]
    if axis == "x":
        ax.set_xticks(ax.get_xticks(), wrapped, rotation=0)
    else:
        ax.set_yticks(ax.get_yticks(), wrapped)


def bar_values(ax, fmt: str = "{:,.0f}", size: int = 7) -> None:
    """Write each bar's value on it."""
    for bars in ax.containers:
        ax.bar_label(bars, labels=[fmt.format(v) if v == v else "" for v in bars.datavalues], fontsize=size, padding=2)


def nothing_measured(ax, text: str) -> None:
    """The one panel that stands where nothing is measured: the reason, no empty axes."""
    import textwrap

    ax.text(0.5, 0.5, textwrap.fill(text, 70), ha="center", va="center", fontsize=9, transform=ax.transAxes)
    ax.set_axis_off()
