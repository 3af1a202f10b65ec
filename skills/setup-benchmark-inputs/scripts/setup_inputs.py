"""Tokenize a local corpus and convert a local Hugging Face checkpoint, once: a second run with the same inputs
does nothing.

    python skills/setup-benchmark-inputs/scripts/setup_inputs.py --corpus FILE [FILE ...] --tokenizer DIR
        --tokens OUT [--hf-checkpoint DIR --checkpoint OUT]

Each output is made by the trainer's CLI (`python -m pithtrain tokenize`, `python -m pithtrain convert
hf-to-pithtrain`), which writes to a temporary directory and renames it into place, so an output either is
complete or does not exist. Beside each output, OUT.inputs.json records the inputs it was made from (path,
size, modification time of every file); an output whose record matches is skipped, one whose record differs
(or is missing) is an error that names it: remove it or pick another OUT.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path


def fingerprint(paths: list[Path]) -> list:
    files = sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
    return [[str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns] for f in files]


def make_once(out: Path, inputs: list[Path], command: list[str]) -> bool:
    """Run `command` to create `out` unless `out` was already made from these inputs; True when it ran."""
    record, want = out.parent / (out.name + ".inputs.json"), fingerprint(inputs)
    if out.exists():
        if record.exists() and json.loads(record.read_text()) == want:
            print(f"{out}: up to date")
            return False
        raise SystemExit(
            f"error: {out} exists but was not made from these inputs ({record} differs or is missing); "
            f"remove it or choose another output"
        )
    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        raise SystemExit(f"error: inputs do not exist: {missing}")
    subprocess.run(command, check=True)
    record.write_text(json.dumps(want))
    print(f"{out}: written")
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", nargs="+", type=Path, required=True, help=".jsonl, .txt or .parquet files")
    ap.add_argument("--tokenizer", type=Path, required=True, help="local directory holding tokenizer.json")
    ap.add_argument("--tokens", type=Path, required=True, help="token shard directory to create")
    ap.add_argument("--hf-checkpoint", type=Path, help="local Hugging Face model directory to convert")
    ap.add_argument("--checkpoint", type=Path, help="pithtrain checkpoint directory to create from it")
    args = ap.parse_args()
    if (args.hf_checkpoint is None) != (args.checkpoint is None):
        ap.error("--hf-checkpoint and --checkpoint go together")
    py = [sys.executable, "-m", "pithtrain"]
    tokenize = [
        *py,
        "tokenize",
        *map(str, args.corpus),
        "--tokenizer",
        str(args.tokenizer),
        "--output",
        str(args.tokens),
    ]
    make_once(args.tokens, [*args.corpus, args.tokenizer], tokenize)
    if args.hf_checkpoint:
        convert = [
            *py,
            "convert",
            "hf-to-pithtrain",
            "--source",
            str(args.hf_checkpoint),
            "--output",
            str(args.checkpoint),
        ]
        make_once(args.checkpoint, [args.hf_checkpoint], convert)
    return 0


if __name__ == "__main__":
    sys.exit(main())
