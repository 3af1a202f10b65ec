"""Same short training on a base revision and on the working tree, compared step by step; prints PASS or FAIL.

    python skills/validate-correctness/scripts/check.py [--base HEAD] [--config examples/qwen3-moe-tiny.toml]
        [--steps 8] [--multiple 3] [--floor 1e-5] [--set SECTION.KEY=VALUE ...] [--record FILE]

Runs the base twice (from a clean `git worktree` of the base commit) and the working tree once, each in its own
process importing only its own tree (trees.py). The two base runs give the noise of every step's loss and
gradient norm; the working tree passes when each step stays within the envelope
max(multiple x |base1 - base2|, floor x |base|) of the base runs' mean. The floor covers backends where two runs
are bit-identical (CPU fp32): it admits summation-order changes, not a different loss. FAILs name the step,
the metric and the gap, and also when the base run imported the same code as the working tree although
pithtrain/ differs from the base (the base did not run).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from trees import RunError, base_worktree, changed_code, repo_root, same_code_problem, train_in_tree

METRICS = ("loss", "grad_norm")


def first_violation(base1: list, base2: list, work: list, multiple: float, floor: float) -> str | None:
    if not (len(base1) == len(base2) == len(work)):
        return f"runs logged {len(base1)}, {len(base2)} and {len(work)} steps (base, base, working tree)"
    for b1, b2, w in zip(base1, base2, work):
        for key in METRICS:
            mean = (b1[key] + b2[key]) / 2
            envelope = max(multiple * abs(b1[key] - b2[key]), floor * abs(mean))
            gap = abs(w[key] - mean)
            if not gap <= envelope:  # also catches NaN
                return (
                    f"step {w['step']} {key}: working tree {w[key]:.6g} vs base {mean:.6g}, gap {gap:.3g} > envelope "
                    f"{envelope:.3g} (= max({multiple:g} x base noise {abs(b1[key] - b2[key]):.3g}, "
                    f"{floor:g} x |base|))"
                )
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", help="repository whose working tree is checked (default: the one holding the cwd)")
    ap.add_argument("--base", default="HEAD", help="base revision (default HEAD: the uncommitted change)")
    ap.add_argument("--config", default="examples/qwen3-moe-tiny.toml", help="run config, relative to each tree")
    ap.add_argument("--steps", type=int, default=8, help="training steps per run")
    ap.add_argument("--multiple", type=float, default=3.0, help="allowed gap as a multiple of the base noise")
    ap.add_argument("--floor", type=float, default=1e-5, help="smallest allowed gap, relative to the base value")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override for every run")
    ap.add_argument("--record", type=Path, help="write hashes, commits and per-step metrics here as JSON")
    args = ap.parse_args()
    repo = repo_root(args.repo)
    overrides = [f"training.max_steps={args.steps}", *args.overrides]
    scratch = Path(tempfile.mkdtemp(prefix="pith-correctness-"))
    changed = changed_code(repo, args.base)
    with base_worktree(repo, args.base) as (base_tree, commit):
        base1, prov1 = train_in_tree(base_tree, args.config, overrides, scratch / "base1", "first base")
        base2, _ = train_in_tree(base_tree, args.config, overrides, scratch / "base2", "second base")
        work, prov_w = train_in_tree(repo, args.config, overrides, scratch / "work", "working tree")
    print(f"base {commit[:12]} code {prov1['code_hash']} ({prov1['package']})")
    print(f"working tree code {prov_w['code_hash']} ({prov_w['package']}); pithtrain/ files changed: {len(changed)}")
    if args.record:
        record = {"base_commit": commit, "base_code": prov1["code_hash"], "work_code": prov_w["code_hash"]}
        record |= {"changed": changed, "base1": base1, "base2": base2, "work": work}
        args.record.write_text(json.dumps(record, indent=1))
    if problem := same_code_problem(changed, prov1, prov_w):
        print(f"FAIL: {problem}")
        return 1
    violation = first_violation(base1, base2, work, args.multiple, args.floor)
    if violation:
        print(f"FAIL: {violation}")
        return 1
    print(f"PASS ({len(work)} steps within the envelope; runs in {scratch})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RunError as e:
        print(f"FAIL: {e}")
        sys.exit(1)
