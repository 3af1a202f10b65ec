"""Scrub the records under results/ of what only the machine that made them knew, and give every throughput
record the command a user would type for it.

    python paper/scrub_records.py [--results results]

1. Absolute paths outside the repository become placeholders (`$OUT/` for the GPU script's output folder,
   `<tmp>` for a temporary folder, `<site-packages>/` for installed packages, nothing for the repository's
   own root), and the lending tool's words for a GPU machine become the hardware ("1 x H200").
2. A throughput record without `command` gets the `python benchmarks/throughput.py ...` line equivalent to its
   call (config, frameworks, GPU counts, routings, repeats, steps), marked `command_reconstructed: true`: the
   calls of issues 4-18 ran through benchmarks/gpu_run.sh, whose environment variables the log's first line
   shows. Idempotent: a second run changes nothing.
"""

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEXT = (".json", ".jsonl", ".log", ".txt", ".md", ".csv")
# (pattern, replacement), applied in order to every text record.
SCRUB = (
    (r"device call (\d+) of this session \(run tool, nvidia-h200(?:-x(\d))?, [^)\n]*\)", r"GPU call \1 (H200 x\2)"),
    (r"\(device tool, kind nvidia-h200(?:-x(\d))?\)", r"(H200 x\1)"),
    (r"nvidia-h200-x(\d)", r"\1 x H200"),
    (r"nvidia-h200", r"1 x H200"),
    (r"H200 x\)", r"H200 x1)"),
    (r"/root/out\b", r"$OUT"),
    (r"/work/(?:main|wt/[\w.-]+)/", r""),
    (r"/work/(?:main|wt/[\w.-]+)\b", r"."),
    (
        r"/(?:usr/local|usr|opt/[\w./-]+?|root/\.pyenv/[\w./-]+?)/lib/python3[.\d]*/(?:site|dist)-packages/",
        r"<site-packages>/",
    ),
    (r"/tmp/[\w.+-]+", r"<tmp>"),
    (r"/root/[\w.-]+", r"<home>"),
)


def scrub_text(text: str) -> str:
    for pattern, repl in SCRUB:
        text = re.sub(pattern, repl, text)
    return text


def call_command(records: list[dict]) -> str:
    """The user-facing command equivalent to one call of benchmarks/throughput.py, from its records."""
    first = records[0]
    if first["smoke"]:
        return "python benchmarks/throughput.py --smoke"
    labels = sorted({r["label"] for r in records})
    gpus = sorted({r["gpus"] for r in records})
    routings = {r["routing"] for r in records}
    per_cell = {}
    for r in records:
        cell = (r["gpus"], r["routing"], r["label"])
        per_cell[cell] = per_cell.get(cell, 0) + 1
    cmd = ["python", "benchmarks/throughput.py", "--config", first["config"], "--frameworks", ",".join(labels)]
    cmd += ["--gpus", ",".join(map(str, gpus))]
    if routings == {"natural", "balanced"}:
        cmd.append("--both-routings")
    elif routings == {"balanced"}:
        cmd.append("--balanced-routing")
    if max(per_cell.values()) > 1:
        cmd += ["--repeats", str(max(per_cell.values()))]
    table = first.get("config_table", {})
    if (first["warmup_steps"], first["timed_steps"]) != (table.get("warmup_steps"), table.get("timed_steps")):
        cmd += ["--steps", f"{first['warmup_steps']},{first['timed_steps']}"]
    return " ".join(cmd)


def add_commands(path: Path) -> str:
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if records and "command" not in records[0]:
        command = call_command(records)
        records = [r | {"command": command, "command_reconstructed": True} for r in records]
    return "".join(json.dumps(r) + "\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python paper/scrub_records.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=REPO / "results", help="the records' folder (default: results/)")
    args = p.parse_args(argv)
    if not args.results.is_dir():
        print(f"--results {args.results}: no such folder; give the records' folder", file=sys.stderr)
        return 2
    changed = 0
    for path in sorted(args.results.rglob("*")):
        if not path.is_file() or path.suffix not in TEXT:
            continue
        before = path.read_text()
        after = scrub_text(before)
        if path.suffix == ".jsonl" and path.parent.name.startswith("throughput"):
            path.write_text(after)
            after = add_commands(path)
        if after != before:
            path.write_text(after)
            changed += 1
            print(f"scrubbed {path.relative_to(args.results)}")
    print(f"{changed} files changed under {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
