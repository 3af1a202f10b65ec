"""`python -m ate_bench {run,list,check,report}`: the ATE-Bench command line.

Exit status: 0 done (a FAIL verdict is still a finished run), 2 bad input or a run that cannot start
(unknown name, malformed task.toml, agent CLI or credentials missing); nothing is recorded then.
"""

import argparse
import json
import sys
from pathlib import Path

from ate_bench import agents
from ate_bench.frameworks import FRAMEWORKS, SOURCE_MODES
from ate_bench.runner import DEFAULT_WORK_ROOT, RunOptions, load_records, report, run_checker, run_once
from ate_bench.tasks import TaskError, find_task, load_tasks
from ate_bench.workspace import DEFAULT_CACHE_DIR, REPO_ROOT, MaterializeError

DEFAULT_TASKS_DIR = REPO_ROOT / "tasks"
DEFAULT_RESULTS_DIR = Path("results") / "ate"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ate_bench",
        description="ATE-Bench: drive a coding agent on a framework workspace and measure its effort "
        "(session duration, active GPU time, agent turns, per-turn context, output tokens).",
    )
    p.add_argument(
        "--tasks-dir",
        type=Path,
        default=DEFAULT_TASKS_DIR,
        help="tasks/<category>/<slug>/ root (default: %(default)s)",
    )
    p.add_argument(
        "--results-dir",
        type=Path,
        default=DEFAULT_RESULTS_DIR,
        help="where run records go (default: %(default)s)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="materialize a workspace, run an agent on a task, check it, record the run")
    run.add_argument("--task", required=True, help="task id, e.g. qa-01 (see `list`)")
    run.add_argument("--framework", required=True, choices=list(FRAMEWORKS))
    run.add_argument(
        "--agent",
        required=True,
        choices=list(agents.AGENTS),
        help="gold/noop validate the harness; they are never agent results",
    )
    run.add_argument(
        "--model",
        default="",
        help="model passed to the agent CLI (required for mini-swe-agent, e.g. anthropic/claude-sonnet-4-5)",
    )
    run.add_argument("--repeat", type=int, default=1, help="independent runs, each on a fresh workspace (the paper: 3)")
    run.add_argument(
        "--no-skills",
        action="store_true",
        help="strip AGENTS.md, CLAUDE.md, skills trees, .claude/.codex/.agents (same for every framework)",
    )
    run.add_argument(
        "--source",
        choices=SOURCE_MODES,
        default="auto",
        help="megatron-lm/torchtitan source: pinned git commit, PyPI sdist, or git if reachable else PyPI",
    )
    run.add_argument(
        "--work-root",
        type=Path,
        default=DEFAULT_WORK_ROOT,
        help="workspaces and agent HOMEs, outside this repo (default: %(default)s)",
    )
    run.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE_DIR,
        help="downloaded sdists and git mirrors (default: %(default)s)",
    )
    run.add_argument(
        "--time-limit-s", type=float, default=None, help="override the task's time limit (harness debugging)"
    )
    run.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass one more environment variable to the agent (recorded by name)",
    )

    sub.add_parser("list", help="list tasks, frameworks and agents")

    check = sub.add_parser("check", help="re-run a task's checker on a saved workspace")
    check.add_argument("--record", type=Path, help="a run's record.json (gives task, framework, workspace, answer)")
    check.add_argument("--task", help="task id (without --record)")
    check.add_argument("--framework", choices=list(FRAMEWORKS), help="(without --record)")
    check.add_argument("--workspace", type=Path, help="(without --record)")
    check.add_argument("--answer", type=Path, help="the agent's final message (Q&A); default: an empty file")

    sub.add_parser("report", help="medians over repeats as a Markdown table, from the records in --results-dir")
    return p


def _cmd_run(args: argparse.Namespace) -> int:
    task = find_task(args.tasks_dir, args.task)
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
        )
        path = run_once(opts)
        rec = json.loads(path.read_text())
        verdict = "PASS" if rec["verdict"]["passed"] else "FAIL: " + "; ".join(rec["verdict"]["reasons"])
        m = rec["metrics"] or {}
        print(f"[{i + 1}/{args.repeat}] {rec['run_id']}: {verdict}")
        turns, out, dur = m.get("agent_turns"), m.get("output_tokens"), m.get("session_duration_s")
        print(f"  turns={turns} output_tokens={out} session_s={dur}")
        print(f"  record: {path}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    for task in load_tasks(args.tasks_dir).values() if args.tasks_dir.is_dir() else []:
        print(f"{task.id:12} {task.tools:9} gpus={task.gpus} {','.join(task.frameworks):32} {task.title}")
    print("frameworks:", ", ".join(FRAMEWORKS))
    print("agents:", ", ".join(agents.AGENTS), f"({', '.join(agents.HARNESS_AGENTS)}: harness validation)")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    if args.record:
        rec = json.loads(args.record.read_text())
        task = find_task(args.tasks_dir, rec["task"]["id"])
        framework, workspace = rec["framework"]["name"], Path(rec["workspace"])
        answer = args.record.parent / agents.FINAL_MESSAGE_FILE
        log_dir = args.record.parent / "recheck"
    elif args.task and args.framework and args.workspace:
        task, framework, workspace = find_task(args.tasks_dir, args.task), args.framework, args.workspace
        answer, log_dir = args.answer, workspace.parent / "recheck"
    else:
        print("ate_bench: check needs --record, or --task, --framework and --workspace", file=sys.stderr)
        return 2
    log_dir.mkdir(parents=True, exist_ok=True)
    if answer is None:
        answer = log_dir / "empty_answer.md"
        answer.write_text("")
    verdict = run_checker(task, framework, workspace, answer, log_dir)
    print(verdict.output)
    print("PASS" if verdict.passed else "FAIL: " + "; ".join(verdict.reasons))
    return 0 if verdict.passed else 1


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
            print(report(load_records(args.results_dir)), end="")
            return 0
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
