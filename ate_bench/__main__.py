"""`python -m ate_bench {run,list,check,report,validate,cost}`: the ATE-Bench command line.

Exit status of `run` and `check`: 0 PASS, 1 FAIL, 3 checker error (ERROR), 2 bad input or a run that
cannot start (unknown name, malformed task.toml, agent CLI or credentials missing, too few GPUs; nothing
is recorded then). `validate`: 0 when every cell is as expected, 1 when one is not, 2 bad input.
"""

import argparse
import json
import sys
from pathlib import Path

from ate_bench import agents
from ate_bench.cost import run_cost
from ate_bench.frameworks import FRAMEWORKS, SOURCE_MODES
from ate_bench.runner import (
    DEFAULT_WORK_ROOT,
    VERDICT_EXIT,
    RunOptions,
    load_records,
    report,
    run_checker,
    run_once,
)
from ate_bench.tasks import PROFILE_GPUS, TaskError, find_task, load_task
from ate_bench.validate import run_validate
from ate_bench.workspace import DEFAULT_CACHE_DIR, REPO_ROOT, MaterializeError

DEFAULT_TASKS_DIR = REPO_ROOT / "tasks"
DEFAULT_RESULTS_DIR = Path("results") / "ate"


def _common(p: argparse.ArgumentParser, default) -> None:
    """--tasks-dir and --results-dir, accepted before or after the subcommand."""
    p.add_argument(
        "--tasks-dir",
        type=Path,
        default=default(DEFAULT_TASKS_DIR),
        help=f"tasks/<category>/<slug>/ root (default: {DEFAULT_TASKS_DIR})",
    )
    p.add_argument(
        "--results-dir",
        type=Path,
        default=default(DEFAULT_RESULTS_DIR),
        help=f"where records go (default: {DEFAULT_RESULTS_DIR}, resolved against the current directory)",
    )


def _source_options(p: argparse.ArgumentParser, default: str = "auto") -> None:
    p.add_argument(
        "--source",
        choices=SOURCE_MODES,
        default=default,
        help="megatron-lm/torchtitan source: pinned git commit, PyPI sdist, or git if reachable else PyPI "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--work-root",
        type=Path,
        default=DEFAULT_WORK_ROOT,
        help="workspaces and agent HOMEs, outside this repo (default: %(default)s)",
    )
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE_DIR,
        help="downloaded sdists and git mirrors (default: %(default)s)",
    )


def _sandbox_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run agents and checkers without the sandbox (ate_bench/sandbox.py) where it cannot be made; "
        "the record says so",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ate_bench",
        description="ATE-Bench: drive a coding agent on a framework workspace and measure its effort "
        "(session duration, active GPU time, agent turns, per-turn context, output tokens).",
    )
    _common(p, lambda d: d)
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help)
        _common(sp, lambda d: argparse.SUPPRESS)  # given here, it overrides the one before the subcommand
        return sp

    run = add("run", "materialize a workspace, run an agent on a task, check it, record the run")
    run.add_argument("--task", required=True, help="task id, e.g. qa-01 (see `list`)")
    run.add_argument("--framework", required=True, choices=list(FRAMEWORKS))
    run.add_argument(
        "--agent",
        required=True,
        choices=list(agents.AGENTS),
        help="gold/noop validate the harness; they are never agent results",
    )
    run.add_argument(
        "--profile",
        choices=list(PROFILE_GPUS),
        help="operate/feature tasks: the size to run (GPUs: "
        + ", ".join(f"{k} {v}" for k, v in PROFILE_GPUS.items())
        + "); default: the task's first profile",
    )
    run.add_argument(
        "--model",
        default="",
        help="model passed to the agent CLI (required for mini-swe-agent, e.g. anthropic/claude-sonnet-4-5)",
    )
    run.add_argument(
        "--repeat", type=int, default=1, help="independent runs (>= 1), each on a fresh workspace (the paper: 3)"
    )
    run.add_argument(
        "--no-skills",
        action="store_true",
        help="remove skills/ trees, .claude/.codex/.agents skills and the '## Skills' section of AGENTS.md/CLAUDE.md",
    )
    run.add_argument(
        "--skills-overlay",
        action="store_true",
        help="torchtitan/megatron-lm: copy this repository's skills/capture-profile into the workspace (recorded)",
    )
    _source_options(run)
    run.add_argument(
        "--time-limit-s", type=float, default=None, help="override the task's time limit (harness debugging)"
    )
    run.add_argument(
        "--scripted",
        nargs="?",
        const="gold",
        metavar="TRAJECTORY",
        help="pipeline check, offline: the agent's model is a local endpoint replaying TRAJECTORY (a JSON file; "
        "alone: the trajectory made from the task's gold). Records say 'pipeline check', never agent results",
    )
    run.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass one more environment variable to the agent (recorded by name)",
    )
    _sandbox_option(run)

    add("list", "list tasks, frameworks and agents")

    check = add("check", "re-run a task's checker on a saved workspace")
    check.add_argument("--record", type=Path, help="a run's record.json (gives task, framework, workspace, answer)")
    check.add_argument("--task", help="task id (without --record)")
    check.add_argument("--framework", choices=list(FRAMEWORKS), help="(without --record)")
    check.add_argument("--workspace", type=Path, help="(without --record)")
    check.add_argument("--profile", choices=list(PROFILE_GPUS), help="(without --record; default: the task's first)")
    check.add_argument("--answer", type=Path, help="the agent's final message (Q&A); default: an empty file")
    _sandbox_option(check)

    add("report", "medians over repeats as a Markdown table, from the run records in --results-dir")

    val = add("validate", "prove the checkers: gold must PASS, noop and every wrong answer must FAIL")
    val.add_argument("--tasks", nargs="+", default=["*"], metavar="GLOB", help="task ids or globs, e.g. 'qa-*'")
    val.add_argument("--frameworks", nargs="+", choices=list(FRAMEWORKS), default=list(FRAMEWORKS))
    val.add_argument("--profiles", nargs="+", choices=list(PROFILE_GPUS), default=list(PROFILE_GPUS))
    val.add_argument(
        "--cases",
        nargs="+",
        default=["*"],
        metavar="GLOB",
        help="case names or globs within each row, e.g. gold 'blind2-*' (default: every case)",
    )
    val.add_argument("--out", type=Path, help="where the record goes (default: <results-dir>/validation)")
    _source_options(val, default="pypi")  # the trees the keys and the literal gold citations are written against
    _sandbox_option(val)

    cost = add("cost", "agent-free cost of each Q&A task: cited lines and bytes, term files, import hops")
    cost.add_argument("--tasks", nargs="+", default=["qa-*"], metavar="GLOB", help="task ids or globs")
    cost.add_argument("--frameworks", nargs="+", choices=list(FRAMEWORKS), default=list(FRAMEWORKS))
    cost.add_argument("--out", type=Path, help="where the record goes (default: <results-dir>/cost)")
    _source_options(cost, default="pypi")
    return p


def _cmd_run(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        raise ValueError(f"--repeat {args.repeat} is not allowed: give the number of runs, at least 1")
    task = find_task(args.tasks_dir, args.task)
    statuses = []
    for i in range(args.repeat):
        opts = RunOptions(
            task=task,
            framework=args.framework,
            agent=args.agent,
            results_dir=args.results_dir,
            model=args.model,
            skills=not args.no_skills,
            source_mode=args.source,
            work_root=args.work_root,
            cache_dir=args.cache_dir,
            time_limit_s=args.time_limit_s,
            pass_env=tuple(args.pass_env),
            profile=args.profile or "",
            sandbox=not args.no_sandbox,
            skills_overlay=("capture-profile",) if args.skills_overlay else (),
            scripted=str(args.scripted or ""),
        )
        path = run_once(opts)
        rec = json.loads(path.read_text())
        v = rec["verdict"]
        statuses.append(v["status"])
        line = v["status"] if v["passed"] else f"{v['status']}: " + "; ".join(v["reasons"])
        m = rec["metrics"] or {}
        print(f"[{i + 1}/{args.repeat}] {rec['run_id']}: {line}")
        if rec["agent_error"]:
            err = rec["agent_error"]
            last = (err["stderr_tail"].splitlines() or ["(no stderr)"])[-1]
            print(f"  AGENT DID NOT RUN ({', '.join(err['reasons'])}), not an answer's FAIL; stderr: {last}")
        if rec["scripted"]:
            print(f"  {rec['scripted']['label']}: {rec['scripted']['turns_served']} turn(s) served")
        dur = m.get("session_duration_s")
        dur_s = f"{dur:.1f}" if dur is not None else "n/a"
        print(f"  turns={m.get('agent_turns')} output_tokens={m.get('output_tokens')} session_s={dur_s}")
        print(f"  record: {path}")
    return max(VERDICT_EXIT[s] for s in statuses)


def _cmd_list(args: argparse.Namespace) -> int:
    where = args.tasks_dir.resolve()
    tasks, broken = [], []
    for toml in sorted(where.glob("*/*/task.toml")) if where.is_dir() else []:
        try:  # one broken task is named, and does not hide the others
            tasks.append(load_task(toml.parent))
        except TaskError as e:
            broken.append(str(e))
    for task in sorted(tasks, key=lambda t: t.id):
        sizes = f"profiles={','.join(task.profiles)}" if task.profiles else f"gpus={task.gpus}"
        print(f"{task.id:12} {task.tools:9} {sizes:26} {','.join(task.frameworks):32} {task.title}")
    if not tasks and not broken:
        print(f"no tasks under {where} (looked for <category>/<slug>/task.toml; --tasks-dir sets it)")
    print("frameworks:", ", ".join(FRAMEWORKS))
    print("agents:", ", ".join(agents.AGENTS), f"({', '.join(agents.HARNESS_AGENTS)}: harness validation)")
    print("profiles:", ", ".join(f"{k} ({v} GPUs)" for k, v in PROFILE_GPUS.items()))
    for error in broken:
        print(f"ate_bench: {error}", file=sys.stderr)
    return 2 if broken else 0


def _cmd_check(args: argparse.Namespace) -> int:
    if args.record:
        record = args.record.resolve()
        rec = json.loads(record.read_text())
        task_dir = Path(rec["task"]["dir"])
        if not task_dir.is_dir():
            raise TaskError(f"{record}: the task directory it names, {task_dir}, does not exist")
        task = load_task(task_dir)  # the task the run used, wherever --tasks-dir points
        framework, workspace = rec["framework"]["name"], Path(rec["workspace"])
        profile = rec["task"].get("profile", "")
        answer = record.parent / agents.FINAL_MESSAGE_FILE
        log_dir = record.parent / "recheck"
    elif args.task and args.framework and args.workspace:
        task, framework, workspace = find_task(args.tasks_dir, args.task), args.framework, args.workspace.resolve()
        profile = task.check_profile(args.profile)
        answer, log_dir = args.answer, workspace.parent / "recheck"
    else:
        print("ate_bench: check needs --record, or --task, --framework and --workspace", file=sys.stderr)
        return 2
    log_dir.mkdir(parents=True, exist_ok=True)
    if answer is None:
        answer = log_dir / "empty_answer.md"
        answer.write_text("")
    verdict = run_checker(task, framework, workspace, answer, log_dir, profile, not args.no_sandbox)
    print(verdict.line())
    print(f"  checker output: {log_dir / 'check.log'}")
    return VERDICT_EXIT[verdict.status]


def _cmd_report(args: argparse.Namespace) -> int:
    """The table from every good record; a bad record.json is named (one line each), and exits 2."""
    records, bad = load_records(args.results_dir)
    print(report(records), end="")
    for line in bad:
        print(f"ate_bench: {line}", file=sys.stderr)
    return 2 if bad else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _cmd_run(args)
        elif args.command == "list":
            return _cmd_list(args)
        elif args.command == "check":
            return _cmd_check(args)
        elif args.command == "report":
            return _cmd_report(args)
        elif args.command == "validate":
            return run_validate(args, ["python -m ate_bench", *(sys.argv[1:] if argv is None else argv)])
        elif args.command == "cost":
            return run_cost(args, ["python -m ate_bench", *(sys.argv[1:] if argv is None else argv)])
        else:
            raise AssertionError(args.command)
    except agents.CannotStart as e:
        print(f"ate_bench: cannot start: {e} (nothing recorded)", file=sys.stderr)
        return 2
    except (TaskError, ValueError, MaterializeError) as e:
        print(f"ate_bench: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
