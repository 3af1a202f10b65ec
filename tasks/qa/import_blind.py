"""Copy a blind answer set into the tasks: `python tasks/qa/import_blind.py SOURCE SET PITHTRAIN_COMMIT FREEZE`.

SOURCE holds `<framework>/<NN-slug>/correct-*.md`, `wrong-*.md` and, for every wrong answer, `wrong-*.why`
(what is wrong with it), written by people who saw only the instruction and the workspace. They are copied
verbatim to `tasks/qa/<NN-slug>/blind/<SET>/<framework>/`, replacing that set's earlier copies of the
answers and their .why files (a `<answer>.adjudicated` file stays: it is ours, see tasks/qa/README.md).
PITHTRAIN_COMMIT, the commit whose tree the writers read (their pithtrain answers cite its lines), and FREEZE,
the freeze of the keys whose instruction they read, go into tasks/qa/blind_sets.toml. `python -m ate_bench
validate` then checks every copy as a cell of the matrix.
Standard library only.

Exit 2 with one line naming the file and the fix when SOURCE does not follow that layout.
"""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

QA_DIR = Path(__file__).resolve().parent
FRAMEWORKS = ("pithtrain", "torchtitan", "megatron-lm")


def plan(source: Path, set_name: str) -> list[tuple[Path, Path]]:
    """(from, to) for every file to copy; ValueError names what does not follow the layout."""
    if not set_name.isidentifier():
        raise ValueError(f"SET = {set_name!r}: need a name like set2 (letters, digits, underscore)")
    copies = []
    for fw_dir in sorted(p for p in source.iterdir() if p.is_dir()):
        if fw_dir.name not in FRAMEWORKS:
            raise ValueError(f"{fw_dir}: not a framework; name the folders {', '.join(FRAMEWORKS)}")
        for q_dir in sorted(p for p in fw_dir.iterdir() if p.is_dir()):
            if not (QA_DIR / q_dir.name / "key.toml").is_file():
                raise ValueError(f"{q_dir}: no task tasks/qa/{q_dir.name}; name the folder as the task is named")
            target = QA_DIR / q_dir.name / "blind" / set_name / fw_dir.name
            for f in sorted(q_dir.iterdir()):
                if not f.name.startswith(("correct-", "wrong-")) or f.suffix not in (".md", ".why"):
                    raise ValueError(f"{f}: only correct-*.md, wrong-*.md and wrong-*.why belong here")
                if f.name.startswith("wrong-") and f.suffix == ".md" and not f.with_suffix(".why").is_file():
                    raise ValueError(f"{f}: no {f.with_suffix('.why').name}; say what is wrong with it")
                copies.append((f, target / f.name))
    if not copies:
        raise ValueError(f"{source}: no answers (<framework>/<NN-slug>/correct-*.md)")
    return copies


def record_set(set_name: str, commit: str, freeze: int) -> None:
    """tasks/qa/blind_sets.toml gets `[SET] pithtrain_commit = <full hash>`, `freeze = N` (others kept);
    ValueError if the commit is unknown."""
    done = subprocess.run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=QA_DIR, capture_output=True)
    if done.returncode != 0:
        raise ValueError(
            f"PITHTRAIN_COMMIT = {commit!r} is not a commit of this repository; give the one the writers read"
        )
    sets_file = QA_DIR / "blind_sets.toml"
    text = sets_file.read_text()
    sets = tomllib.loads(text) | {set_name: {"pithtrain_commit": done.stdout.decode().strip(), "freeze": freeze}}
    head = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    body = "".join(
        f'[{name}]\npithtrain_commit = "{s["pithtrain_commit"]}"\nfreeze = {s["freeze"]}\n'
        for name, s in sorted(sets.items())
    )
    sets_file.write_text(head + body)


def main(argv: list[str]) -> int:
    if len(argv) != 4 or not argv[3].isdigit():
        print(
            "usage: import_blind.py SOURCE SET PITHTRAIN_COMMIT FREEZE   (e.g. /work/blind/set2 set2 bc8b724 1)",
            file=sys.stderr,
        )
        return 2
    source, set_name, commit, freeze = Path(argv[0]), argv[1], argv[2], int(argv[3])
    try:
        copies = plan(source, set_name)
        record_set(set_name, commit, freeze)
    except (ValueError, OSError, tomllib.TOMLDecodeError) as e:
        print(f"import_blind: {e}", file=sys.stderr)
        return 2
    for target in sorted({to.parent for _, to in copies}):
        for old in target.glob("*"):
            if old.suffix in (".md", ".why"):
                old.unlink()
    for src, to in copies:
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, to)
    answers = sum(1 for _, to in copies if to.suffix == ".md")
    print(f"import_blind: {answers} answers of {source} copied as set {set_name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
