"""Training runs from a chosen source tree, each in its own process that can import no other `pithtrain`.

`pithtrain` is a namespace package and the development install maps it through an editable finder, so a plain
`cd base && python -m pithtrain` can merge or replace the base tree's modules with the working tree's (the
authors' correctness skill passed every change that way). The child started by `train_in_tree` removes every
other route to `pithtrain` before importing it, checks that each `pithtrain.*` module it ran came from the
given tree, and records the hash of the code it imported. Shared by validate-correctness and
validate-performance (which imports this file by path).

    python trees.py --tree DIR --provenance FILE -- train CONFIG [--set ...]   # the child (used internally)
"""

import argparse
import contextlib
import hashlib
import importlib
import json
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class RunError(Exception):
    """A training run that did not finish, or that imported code from outside its tree."""


def code_hash(package_dir: Path) -> str:
    """sha256 over the relative paths and bytes of every .py file under `package_dir`."""
    h = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        h.update(str(path.relative_to(package_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def repo_root(path: str | None) -> Path:
    return Path(git(Path(path or "."), "rev-parse", "--show-toplevel"))


def changed_code(repo: Path, base: str) -> list[str]:
    """Files under pithtrain/ that differ between `base` and the working tree, untracked ones included."""
    changed = git(repo, "diff", "--name-only", base, "--", "pithtrain").splitlines()
    changed += git(repo, "ls-files", "--others", "--exclude-standard", "--", "pithtrain").splitlines()
    return sorted(p for p in changed if p)


def same_code_problem(changed: list[str], base_prov: dict, work_prov: dict) -> str:
    """Why the comparison proves nothing, or "": both sides ran the same code although pithtrain/ differs (the base
    imported the working tree, as the authors' skill once did)."""
    if changed and base_prov["code_hash"] == work_prov["code_hash"]:
        return f"base and working tree ran the same code ({base_prov['code_hash']}) although {changed} differ"
    return ""


@contextlib.contextmanager
def base_worktree(repo: Path, base: str):
    """A clean checkout of `base` (detached `git worktree`, removed afterwards); yields (path, commit)."""
    commit = git(repo, "rev-parse", "--verify", f"{base}^{{commit}}")
    scratch = Path(tempfile.mkdtemp(prefix="pith-base-"))
    tree = scratch / "base"
    git(repo, "worktree", "add", "--detach", str(tree), commit)
    try:
        yield tree, commit
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


def train_in_tree(tree: Path, config: str, overrides: list[str], run_dir: Path, label: str) -> tuple[list, dict]:
    """`python -m pithtrain train config` from `tree` (config relative to it); returns (metrics records, provenance)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    provenance = run_dir / "provenance.json"
    sets = [f'run_dir="{run_dir}"', "checkpoint.interval=0", *overrides]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--tree", str(tree), "--provenance", str(provenance)]
    cmd += ["--", "train", config, *[a for s in sets for a in ("--set", s)]]
    log = run_dir / "log.txt"
    with open(log, "w") as out:  # PYTHONPATH stays (dependencies may live there): the child drops other pithtrains
        rc = subprocess.run(cmd, cwd=tree, stdout=out, stderr=subprocess.STDOUT).returncode
    tail = " | ".join(log.read_text().strip().splitlines()[-3:])
    if rc != 0:
        raise RunError(f"the {label} run exited {rc} ({log}): {tail}")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)  # the final save: gigabytes at GPU sizes, never read
    return records, json.loads(provenance.read_text())


def isolate(tree: Path) -> None:
    """Leave `tree` as the only place `pithtrain` can come from."""
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
    sys.path[:] = [p for p in sys.path if "__editable__" not in p and not (Path(p or ".") / "pithtrain").is_dir()]
    sys.path.insert(0, str(tree))


def child(tree: Path, provenance: Path, argv: list[str]) -> int:
    isolate(tree)
    import pithtrain

    package = [str(Path(p).resolve()) for p in pithtrain.__path__]
    if package != [str(tree / "pithtrain")]:
        print(f"pithtrain resolves to {package}, not only {tree / 'pithtrain'}", file=sys.stderr)
        return 3
    sys.argv = ["pithtrain", *argv]
    # Each logged step's process CPU time beside its wall time: on a shared CPU, other processes stretch the wall
    # clock of a step but hardly its CPU time (validate-performance reads it).
    cpu_at_log = []
    logger_class = importlib.import_module("pithtrain.modules.logging").ProgressLogger
    wall_log = logger_class.log

    def log_with_cpu(self, step, *args, **kwargs):
        cpu_at_log.append((step, time.process_time()))
        return wall_log(self, step, *args, **kwargs)

    logger_class.log = log_with_cpu
    try:
        runpy.run_module("pithtrain", run_name="__main__", alter_sys=True)
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    outside = sorted(
        name
        for name, m in list(sys.modules.items())
        if name.startswith("pithtrain.") and getattr(m, "__file__", None)
        and not Path(m.__file__).resolve().is_relative_to(tree)
    )  # fmt: skip
    if outside:
        print(f"modules imported from outside {tree}: {outside}", file=sys.stderr)
        return 3
    record = {"tree": str(tree), "package": package[0], "code_hash": code_hash(tree / "pithtrain")}
    record["device"] = "cuda" if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized() else "cpu"
    record["step_cpu_s"] = {step: t - t0 for (_, t0), (step, t) in zip(cpu_at_log, cpu_at_log[1:])}
    provenance.write_text(json.dumps(record))
    return rc


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", required=True, type=lambda p: Path(p).resolve())
    ap.add_argument("--provenance", required=True, type=Path)
    split = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    args = ap.parse_args(sys.argv[1:split])
    sys.exit(child(args.tree, args.provenance, sys.argv[split + 1 :]))
