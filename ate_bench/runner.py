"""One run: materialize, launch the agent under its time limit, check, measure, write the record.

A run record is `results/ate/<run_id>/record.json`, next to the stamped stream, the agent's transcript,
the workspace diff and the checker's log. The workspace itself stays under the work root (outside this
repository: Claude Code reads CLAUDE.md files in every parent of its working directory) so `check` can
re-run a checker on it.
"""

import dataclasses
import json
import os
import platform
import secrets
import statistics
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ate_bench import agents
from ate_bench.gpu import GpuSampler, SampleSource, gpu_inventory, nvidia_smi_source
from ate_bench.metrics import METRIC_COLUMNS, compute_metrics
from ate_bench.procs import make_tree_predicate, run_process_tree
from ate_bench.tasks import TaskSpec
from ate_bench.workspace import DEFAULT_CACHE_DIR, materialize, workspace_diff

RECORD_SCHEMA = "ate-bench-run-1"
DEFAULT_WORK_ROOT = Path(tempfile.gettempdir()) / "ate-bench"
# Passed to the agent and the checker by name; nothing else from the caller's environment is.
BASE_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TZ", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES")
BASE_ENV += ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


@dataclass
class RunOptions:
    task: TaskSpec
    framework: str
    agent: str
    results_dir: Path
    model: str = ""
    """Passed to the agent's CLI; empty: the agent's default."""
    skills: bool = True
    """Keep agent instruction files (AGENTS.md, CLAUDE.md, skills, .claude/); False strips them."""
    source_mode: str = "auto"
    work_root: Path = DEFAULT_WORK_ROOT
    cache_dir: Path = DEFAULT_CACHE_DIR
    time_limit_s: float | None = None
    """Overrides the task's time_limit_min (harness debugging)."""
    pass_env: tuple[str, ...] = ()
    """Extra variable names passed to the agent (recorded by name)."""
    gpu_source: SampleSource = nvidia_smi_source


@dataclass
class Verdict:
    passed: bool
    reasons: list[str]
    output: str
    returncode: int


def _minimal_env(names: tuple[str, ...], home: Path, tmp: Path) -> dict[str, str]:
    env = {n: os.environ[n] for n in names if n in os.environ}
    return {**env, "HOME": str(home), "TMPDIR": str(tmp)}


def run_checker(task: TaskSpec, framework: str, workspace: Path, answer: Path, log_dir: Path) -> Verdict:
    """`check.py --workspace W --framework F --answer A` in W; PASS needs exit 0 and a `PASS` line."""
    lines: list[str] = []
    argv = [sys.executable, str(task.checker), "--workspace", str(workspace), "--framework", framework]
    argv += ["--answer", str(answer)]
    home = log_dir / "check-home"
    home.mkdir(parents=True, exist_ok=True)
    done = run_process_tree(
        argv,
        cwd=workspace,
        env=_minimal_env(BASE_ENV, home, home),
        time_limit_s=task.check_time_limit_min * 60,
        on_line=lambda t, line: lines.append(line),
        stderr_path=log_dir / "check.stderr",
    )
    output = "\n".join(lines)
    (log_dir / "check.log").write_text(output + "\n")
    reasons = [line.removeprefix("FAIL").lstrip(": ").strip() for line in lines if line.startswith("FAIL")]
    passed = done.returncode == 0 and any(line.strip() == "PASS" for line in lines) and not reasons
    if done.timed_out:
        reasons.append(f"checker ran past its {task.check_time_limit_min} min limit")
    elif done.returncode not in (0, 1):
        tail = (log_dir / "check.stderr").read_text(errors="replace")[-2000:]
        reasons.append(f"checker error (exit {done.returncode}): {tail.strip()}")
    elif not passed and not reasons:
        reasons.append("checker printed neither PASS nor FAIL")
    return Verdict(passed=passed, reasons=reasons, output=output, returncode=done.returncode)


def _host() -> dict[str, object]:
    return {
        "node": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "gpus": gpu_inventory(),
    }


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


def run_once(opts: RunOptions) -> Path:
    """One run of one agent on one task and framework; returns the record's path.

    Raises agents.CannotStart (nothing written) when the agent cannot run here.
    """
    task = opts.task
    if opts.framework not in task.frameworks:
        raise ValueError(f"task {task.id} is not valid for {opts.framework!r}; valid: {', '.join(task.frameworks)}")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    skills = "skills" if opts.skills else "noskills"
    run_id = f"{task.id}_{opts.framework}_{opts.agent}_{skills}_{stamp}_{secrets.token_hex(2)}"
    work, run_dir = opts.work_root / run_id, opts.results_dir / run_id
    prompt = task.instruction(opts.framework)

    # Phase 1: can the agent start at all? Nothing is created before this passes.
    caller_env = dict(os.environ)
    launch = agents.make_launch(
        opts.agent, task, opts.framework, prompt, work / "workspace", run_dir, opts.model, caller_env
    )

    # Phase 2: a fresh workspace, the agent's own HOME and TMPDIR (no user-level instruction files).
    ws = materialize(
        opts.framework,
        work / "workspace",
        mode=opts.source_mode,
        skills=opts.skills,
        prepare_dir=task.prepare_dir(opts.framework),
        cache_dir=opts.cache_dir,
    )
    home, tmp = work / "home", work / "tmp"
    for d in (home, tmp, run_dir):
        d.mkdir(parents=True, exist_ok=True)
    env = {**_minimal_env(BASE_ENV + opts.pass_env, home, tmp), **launch.env}

    # Phase 3: the agent, its stdout stamped line by line, GPUs sampled while it runs.
    sampler = GpuSampler(opts.gpu_source, is_agent_pid=lambda pid: False)

    def on_start(pid: int) -> None:
        sampler.is_agent_pid = make_tree_predicate(pid)
        sampler.start()

    time_limit_s = opts.time_limit_s if opts.time_limit_s is not None else task.time_limit_min * 60
    with open(run_dir / agents.STREAM_FILE, "w") as stream:

        def on_line(t: float, line: str) -> None:
            stream.write(json.dumps({"t": t, "line": line}) + "\n")
            stream.flush()

        proc = run_process_tree(
            launch.argv, ws.path, env, time_limit_s, on_line, run_dir / "agent.stderr", on_start=on_start
        )
    gpu = sampler.stop()

    # Phase 4: transcript -> metrics; checker; diff.
    agents.collect_transcript(opts.agent, home, run_dir)
    metrics, transcript, metric_error = None, None, ""
    try:
        transcript = agents.parse_transcript(opts.agent, run_dir)
        metrics = compute_metrics(transcript, proc.start, proc.end, gpu)
    except (ValueError, KeyError, TypeError, FileNotFoundError) as e:
        metric_error = f"{type(e).__name__}: {e}"
    answer = run_dir / agents.FINAL_MESSAGE_FILE
    if not answer.is_file():
        answer.write_text(transcript.final_message if transcript else "")
    verdict = run_checker(task, opts.framework, ws.path, answer, run_dir)
    diff, changed = workspace_diff(ws.path)
    (run_dir / "workspace.diff").write_text(diff)
    notes = []
    if task.tools == "read-only" and changed:
        notes.append(f"read-only task, but the workspace changed: {', '.join(changed[:20])}")
    if proc.timed_out:
        notes.append(f"agent ran past the {time_limit_s:.0f} s limit; its process tree was killed")

    record = {
        "schema": RECORD_SCHEMA,
        "run_id": run_id,
        "task": {"id": task.id, "category": task.category, "title": task.title, "dir": str(task.dir)},
        "framework": {
            "name": opts.framework,
            "mode": ws.mode,
            "version": ws.version,
            "tree_sha256": ws.tree_sha256,
            "source": ws.source,
            "skills": ws.skills,
            "stripped": ws.stripped,
            "prepared": ws.prepared,
            "notes": ws.notes,
        },
        "agent": {
            "name": opts.agent,
            "kind": "harness-validation" if opts.agent in agents.HARNESS_AGENTS else "agent",
            "version": (transcript.agent_version if transcript else "") or "unknown",
            "model": (transcript.model if transcript else "") or opts.model or "default",
            "argv": [a if a != prompt else "<instruction.md>" for a in launch.argv],
            "secrets_passed": launch.secret_names,
            "env_passed": sorted(env),
        },
        "metrics": dataclasses.asdict(metrics) if metrics else None,
        "metrics_error": metric_error,
        "verdict": {"passed": verdict.passed, "reasons": verdict.reasons, "checker_exit": verdict.returncode},
        "exit": {"returncode": proc.returncode, "timed_out": proc.timed_out, "time_limit_s": time_limit_s},
        "notes": notes,
        "workspace": str(ws.path),
        "workspace_diff": diff,
        "changed_paths": changed,
        "transcript": str(run_dir / _transcript_name(opts.agent)),
        "host": _host(),
        "started_at": _iso(proc.start),
        "ended_at": _iso(proc.end),
    }
    path = run_dir / "record.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def _transcript_name(agent: str) -> str:
    if agent == "mini-swe-agent":
        return agents.TRAJECTORY_FILE
    elif agent == "codex":
        return agents.ROLLOUT_FILE
    else:
        return agents.STREAM_FILE


def load_records(results_dir: Path) -> list[dict]:
    records = []
    for path in sorted(results_dir.glob("*/record.json")):
        rec = json.loads(path.read_text())
        if rec.get("schema") == RECORD_SCHEMA:
            records.append(rec)
    return records


def report(records: list[dict]) -> str:
    """Medians over repeats, one row per (task, framework, agent, skills); gold/noop kept apart."""
    groups: dict[tuple, list[dict]] = {}
    for rec in records:
        key = (rec["agent"]["kind"], rec["task"]["id"], rec["framework"]["name"], rec["agent"]["name"])
        groups.setdefault((*key, rec["framework"]["skills"]), []).append(rec)
    header = ["task", "framework", "agent", "skills", "runs", "pass", *(h for _, h, _ in METRIC_COLUMNS)]
    sections = []
    for kind, title in (
        ("agent", "Agent results"),
        ("harness-validation", "Harness validation (gold/noop: not agent results)"),
    ):
        rows = []
        for (k, task, fw, agent, skills), recs in sorted(groups.items()):
            if k != kind:
                continue
            measured = [r["metrics"] for r in recs if r["metrics"]]
            cells = [
                task,
                fw,
                agent,
                skills,
                str(len(recs)),
                f"{sum(r['verdict']['passed'] for r in recs)}/{len(recs)}",
            ]
            for key, _, fmt in METRIC_COLUMNS:
                values = [m[key] for m in measured]
                cells.append(fmt(statistics.median(values)) if values else "n/a")
            rows.append("| " + " | ".join(cells) + " |")
        if rows:
            sep = "|" + "|".join("---" for _ in header) + "|"
            sections.append(f"## {title}\n\n| " + " | ".join(header) + " |\n" + sep + "\n" + "\n".join(rows))
    return "\n\n".join(sections) + "\n" if sections else "no run records\n"
