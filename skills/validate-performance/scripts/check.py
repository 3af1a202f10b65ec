"""Tokens/s of a base revision against the working tree, alternating runs; prints PASS, FAIL or INCONCLUSIVE.

    python skills/validate-performance/scripts/check.py [--base HEAD | --base-dir DIR] [--config CFG]
        [--steps 64] [--warmup-steps 4] [--rounds 3] [--tolerance 0.07] [--set SECTION.KEY=VALUE ...]

Runs base, working tree, base, working tree, ... (`--rounds` of each, all children of this process, each
importing only its own tree: ../../validate-correctness/scripts/trees.py), every step logged. A run's rate is the
median tokens/s of its steps after `--warmup-steps` (by the process's CPU clock on a CPU, where 8 people share 2
cores; by the wall clock on a GPU), a side's rate the median of its runs. Verdict, exit status:
  INCONCLUSIVE (3) when the base runs' rates differ by more than the tolerance (max - min) / max: the machine's
      noise is as large as the change to be judged, so no verdict is given;
  FAIL (1) when the working tree's rate is below the base's x (1 - tolerance);
  PASS (0) otherwise.
On a shared 2-core CPU, 64 steps of 512 tokens (--set training.global_batch_size=4 --set
training.micro_batch_size=4), 3 runs a side and the 7% tolerance catch a 10% slowdown (tests/test_skills.py);
with steps of 2,048 tokens, whose data outgrow the caches the other processes share, identical runs were 5-7%
apart. `--base-dir` compares against a tree on disk instead of a revision (no git).
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validate-correctness" / "scripts"))
from trees import RunError, base_worktree, changed_code, repo_root, same_code_problem, train_in_tree  # noqa: E402

INCONCLUSIVE = 3  # the exit status when the base runs disagree by more than the tolerance


def rate(records: list, provenance: dict, warmup: int) -> float:
    """The median tokens/s of the run's steps after warm-up, by the process's CPU clock on a CPU run (other
    processes on a shared CPU stretch a step's wall time four-fold, its CPU time by a few percent), by the wall
    clock on a GPU."""
    cpu_s = provenance["step_cpu_s"] if provenance["device"] == "cpu" else {}
    timed = [
        r["tokens_per_s"] * r["step_time_s"] / (cpu_s[str(r["step"])] if cpu_s else r["step_time_s"])
        for r in records
        if r["step"] > warmup and (not cpu_s or str(r["step"]) in cpu_s)
    ]
    if len(timed) < 2:
        raise RunError(f"fewer than 2 logged steps after the {warmup} warm-up steps: raise --steps")
    return statistics.median(timed)


def measure(base_tree: Path, work_tree: Path, args, scratch: Path) -> tuple[list, list, dict, dict]:
    overrides = [f"training.max_steps={args.steps}", "logging.log_interval=1", *args.overrides]
    base, work = [], []
    for i in range(args.rounds):  # alternate, so drifts of the machine hit both sides alike
        records, prov_b = train_in_tree(base_tree, args.config, overrides, scratch / f"base{i}", f"base #{i + 1}")
        base.append(rate(records, prov_b, args.warmup_steps))
        records, prov_w = train_in_tree(work_tree, args.config, overrides, scratch / f"work{i}", f"work #{i + 1}")
        work.append(rate(records, prov_w, args.warmup_steps))
    return base, work, prov_b, prov_w


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", help="repository whose working tree is measured (default: the one holding the cwd)")
    ap.add_argument("--base", default="HEAD", help="base revision, checked out with git worktree")
    ap.add_argument("--base-dir", type=lambda p: Path(p).resolve(), help="base source tree on disk instead")
    ap.add_argument("--work-dir", type=lambda p: Path(p).resolve(), help="with --base-dir: the measured tree")
    ap.add_argument("--config", default="examples/qwen3-moe-tiny.toml", help="run config, relative to each tree")
    ap.add_argument("--steps", type=int, default=64, help="training steps per run")
    ap.add_argument("--warmup-steps", type=int, default=4, help="first steps left out of the rate")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each side (at least 2: the spread needs two)")
    ap.add_argument("--tolerance", type=float, default=0.07, help="allowed regression, and base disagreement")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override for every run")
    ap.add_argument("--record", type=Path, help="write the rates and code hashes here as JSON")
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds must be at least 2: the base spread needs two base runs")
    scratch = Path(tempfile.mkdtemp(prefix="pith-performance-"))
    if args.base_dir:
        work_tree = args.work_dir or repo_root(args.repo)
        base, work, prov_b, prov_w = measure(args.base_dir, work_tree, args, scratch)
        base_name, changed = str(args.base_dir), None
    else:
        repo = repo_root(args.repo)
        changed = changed_code(repo, args.base)
        with base_worktree(repo, args.base) as (base_tree, commit):
            base, work, prov_b, prov_w = measure(base_tree, repo, args, scratch)
        base_name = commit[:12]
    spread = (max(base) - min(base)) / max(base)
    tolerance = args.tolerance
    floor = statistics.median(base) * (1 - tolerance)
    print(f"base {base_name} code {prov_b['code_hash']}: tokens/s {', '.join(f'{r:,.0f}' for r in base)}")
    print(f"working tree code {prov_w['code_hash']}: tokens/s {', '.join(f'{r:,.0f}' for r in work)}")
    print(f"base spread {100 * spread:.2f}%, tolerance {100 * tolerance:.2f}%, floor {floor:,.0f} tokens/s")
    if args.record:
        record = {"base": base_name, "base_code": prov_b["code_hash"], "work_code": prov_w["code_hash"]}
        record |= {"base_tokens_per_s": base, "work_tokens_per_s": work, "spread": spread, "tolerance": tolerance}
        args.record.write_text(json.dumps(record, indent=1))
    if problem := same_code_problem(changed, prov_b, prov_w):
        print(f"FAIL: {problem}")
        return 1
    code, line = verdict(base, work, tolerance)
    print(line)
    return code


def verdict(base: list[float], work: list[float], tolerance: float) -> tuple[int, str]:
    """(exit status, last line) from the runs' rates: INCONCLUSIVE when the base runs disagree by more than the
    tolerance, else FAIL when the working tree's median is below the base's by more than it, else PASS."""
    spread = (max(base) - min(base)) / max(base)
    base_rate, work_rate = statistics.median(base), statistics.median(work)
    if spread > tolerance:
        return INCONCLUSIVE, (
            f"INCONCLUSIVE: the base runs differ by {100 * spread:.1f}%, more than the tolerance "
            f"{100 * tolerance:.1f}%: this machine's noise hides a change of that size; rerun when it is quieter, "
            "with more --steps, or state a larger --tolerance"
        )
    if work_rate < base_rate * (1 - tolerance):
        return 1, (
            f"FAIL: working tree {work_rate:,.0f} tokens/s is {100 * (1 - work_rate / base_rate):.1f}% below the "
            f"base ({base_rate:,.0f}, medians of the runs), beyond the tolerance {100 * tolerance:.2f}%"
        )
    return 0, f"PASS (working tree {work_rate:,.0f} tokens/s, {100 * (work_rate / base_rate - 1):+.1f}% vs base)"


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RunError as e:
        print(f"FAIL: {e}")
        sys.exit(1)
